#!/usr/bin/env python3
"""Opcode counts of selected kernels in `cuobjdump -sass` output (run on the GPU machine, where cuobjdump is).

    cuobjdump -sass build-dev/kernel_check > k.sass
    python3 dev/cuda/sass_ops.py k.sass 'gemm_decode_v5.*Li451E' 'gemm_decode_v5.*Li963E'

Each pattern is a regular expression on the mangled function name; every matching function prints its total
instruction count and the counts of the opcodes that make up a decode GEMM's stage loop (tensor, dequantization,
shared loads, scale step), so two versions' instruction mixes can be compared before they are timed.
"""
import collections
import re
import sys

OPS = ["HMMA", "HGMMA", "PRMT", "LOP3", "SHF", "HADD2", "HFMA2", "HMUL2", "IMAD", "IADD3", "LDS", "STS", "FFMA",
       "FADD", "LDGSTS", "BAR", "SYNCS", "MUFU"]


def functions(text):
    for part in re.split(r"\n\s+Function : ", text)[1:]:
        name, _, body = part.partition("\n")
        yield name.strip(), body


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(sys.argv[1]).read()
    for pat in sys.argv[2:]:
        rx = re.compile(pat)
        for name, body in functions(text):
            if not rx.search(name):
                continue
            ops = collections.Counter()
            for line in body.split("\n"):
                m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", line)
                if m:
                    ops[m.group(1)] += 1
            total = sum(v for k, v in ops.items() if k != "NOP")
            mix = " ".join(f"{k} {ops[k]}" for k in OPS if ops[k])
            print(f"{name}\n  {total} instructions: {mix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

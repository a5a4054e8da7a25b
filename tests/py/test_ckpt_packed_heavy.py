"""The calibrated half of test_ckpt_packed.py (same checks): int4-awq (AWQ GEMM layout) and int4-gptq with real
act-order, quantized from the house model; packed in the engine vs the f32 dequantization path. Exit code 0 = pass."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ckpt_packed  # noqa: E402

if __name__ == "__main__":
    test_ckpt_packed.main(test_ckpt_packed.HEAVY)

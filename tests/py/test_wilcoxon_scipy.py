"""test_wilcoxon_scipy.py — assay's Wilcoxon signed-rank test (src/eval/wilcoxon.c) against
scipy.stats.wilcoxon(x, y) with its defaults, on cases that reach each of scipy's branches: exact (n <= 50, no
ties, no zeros), the permutation test (n <= 13 with ties or zeros), the normal approximation with ties and zeros
(13 < n <= 50, and every n > 50), judge-like integer scores 1-5 up to n = 400, continuous differences, all-zero and
one-pair samples (a single zero difference, which scipy refuses, is skipped). Statistic and p-value must agree to 1e-12 (relative)."""
import math
import os
import random
import subprocess
import warnings

from scipy.stats import wilcoxon

from testlib import check, finish

TOOL = os.path.join(os.environ["ASSAY_BUILD_DIR"], "support", "wilcoxon_cases")

rng = random.Random(20240611)
cases = []
for n in list(range(1, 61)) + [75, 100, 150, 200, 300, 400]:
    # integer scores 1-5 (ties and zeros, as a judge gives them)
    for _ in range(3):
        x = [rng.randint(1, 5) for _ in range(n)]
        y = [min(5, max(1, v + rng.choice([-2, -1, -1, 0, 0, 0, 1]))) for v in x]
        cases.append((x, y))
    # continuous differences: no ties, no zeros
    x = [rng.gauss(0, 1) for _ in range(n)]
    y = [v + rng.gauss(0.3, 1) for v in x]
    cases.append((x, y))
    # distinct half-integers with a few repeats and a zero
    x = [rng.randint(-20, 20) / 2 for _ in range(n)]
    y = [0.0] * n
    cases.append((x, y))
cases.append(([3.0] * 5, [3.0] * 5))          # all zero, n <= 13: permutation, p = 1
cases.append(([2.0, 1.0], [1.0, 2.0]))
cases.append(([1.0], [2.0]))

lines = [" ".join(repr(float(v)) for v in x) + " | " + " ".join(repr(float(v)) for v in y) for x, y in cases]
out = subprocess.run([TOOL], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout.split("\n")
methods = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for (x, y), line in zip(cases, out):
        stat, p, method, nzero = line.split()
        stat, p = float(stat), float(p)
        methods[method] = methods.get(method, 0) + 1
        try:
            ref = wilcoxon(x, y)
        except ValueError:  # scipy's permutation test refuses a single pair with a zero difference
            check(len(x) == 1, f"scipy refused n={len(x)}")
            continue
        rs, rp = float(ref.statistic), float(ref.pvalue)
        same = (math.isnan(rp) and math.isnan(p)) or math.isclose(p, rp, rel_tol=1e-12, abs_tol=1e-300)
        check(math.isclose(stat, rs, rel_tol=1e-12) and same,
              f"n={len(x)} {method}: assay W={stat} p={p!r}, scipy W={rs} p={rp!r}")
check(all(methods.get(m, 0) > 20 for m in ("exact", "permutation", "normal")), f"every branch reached: {methods}")
finish(f"wilcoxon vs scipy, {len(cases)} cases {methods}")

"""The slower half of test_ckpt_house.py (same oracle): int4-gptq and int4-awq (calibration runs) and the E5M2
variants of the fp8 schemes, quantized from the house model and run by the engine. Exit code 0 = pass."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ckpt_house  # noqa: E402

if __name__ == "__main__":
    test_ckpt_house.main(test_ckpt_house.HEAVY)

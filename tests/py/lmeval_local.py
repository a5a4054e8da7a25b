"""lmeval_local.py — lm-evaluation-harness's own task configs fed the bundled data (no network).

lm-eval downloads its datasets from the Hugging Face hub; here each task's yaml is loaded from the installed
lm_eval package and its dataset replaced through `custom_dataset` by rows built from $ASSAY_SHARED/data in the
hub dataset's field layout. Used by test_eval_prompts.py (prompts) and bench/eval_vs_transformers.py (scores).
"""
import csv
import json
import os

os.environ["HF_DATASETS_OFFLINE"] = "1"
import datasets  # noqa: E402
import lm_eval  # noqa: E402
from lm_eval.api.task import ConfigurableTask  # noqa: E402
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

datasets.disable_progress_bars()
TASKS = os.path.join(os.path.dirname(lm_eval.__file__), "tasks")


def lm_eval_task(yaml_rel, splits, num_fewshot, drop_process_docs=False, seed=1234):
    cfg = load_yaml(os.path.join(TASKS, yaml_rel))
    dd = datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()})
    cfg["custom_dataset"] = lambda **kw: dd
    cfg["num_fewshot"] = num_fewshot
    if drop_process_docs:
        cfg.pop("process_docs", None)
    t = ConfigurableTask(config=cfg)
    t.set_fewshot_seed(seed)  # lm-eval's default fewshot_random_seed
    return t


def arc_rows(path):
    out = []
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        ch = d["question"]["choices"]
        out.append({"id": d["id"], "question": d["question"]["stem"],
                    "choices": {"text": [c["text"] for c in ch], "label": [c["label"] for c in ch]},
                    "answerKey": d["answerKey"]})
    return out


def piqa_rows(data):
    rows = [json.loads(l) for l in open(os.path.join(data, "piqa/valid.jsonl"), encoding="utf-8")]
    labels = [int(x) for x in open(os.path.join(data, "piqa/valid-labels.lst")).read().split()]
    for r, lab in zip(rows, labels):
        r["label"] = lab
    return rows


def hellaswag_docs(data):
    """The llama.cpp-format file: per task the preprocessed context, the gold index, the 4 endings."""
    text = ""
    for part in ("hellaswag_val_full.part1.txt", "hellaswag_val_full.part2.txt"):
        text += open(os.path.join(data, "hellaswag", part), encoding="utf-8").read()
    lines = text.split("\n")
    return [{"query": lines[i], "choices": lines[i + 2:i + 6], "label": int(lines[i + 1])}
            for i in range(0, len(lines) - 5, 6)]


def mmlu_rows(path):
    rows = list(csv.reader(open(path, encoding="utf-8", newline="")))
    assert rows[0] == ["question", "choice0", "choice1", "choice2", "choice3", "answer"]
    return [{"question": r[0], "choices": r[1:5], "answer": int(r[5])} for r in rows[1:]]


def wikitext_pages(path):
    # The EleutherAI/wikitext_document_level loader's page split (its _generate_examples), on wiki.test.raw.
    pages, ret = [], []
    for line in open(path, encoding="utf-8").read().split("\n"):
        rline = line.replace("= = =", "===").replace("= =", "==").strip()
        if rline.startswith("= ") and rline.strip().endswith(" ="):
            page = "\n".join(ret)
            if page.strip():
                pages.append(page)
            ret = []
        ret.append(line)
    pages.append("\n".join(ret))
    return pages


def task(name, data, num_fewshot=None):
    """lm-eval's task `name` (arc_challenge, piqa, hellaswag, mmlu_<subject>, gsm8k, wikitext) on the bundled data;
    num_fewshot None = assay's default for it (mmlu 5, gsm8k 5, else 0)."""
    if name == "arc_challenge":
        test = arc_rows(os.path.join(data, "arc_challenge/ARC-Challenge-Test.4opt_subset.jsonl"))
        dev = arc_rows(os.path.join(data, "arc_challenge/ARC-Challenge-Dev.4opt_subset.jsonl"))
        return lm_eval_task("arc/arc_challenge.yaml", {"test": test, "train": dev}, num_fewshot or 0)
    if name == "piqa":
        rows = piqa_rows(data)
        return lm_eval_task("piqa/piqa.yaml", {"validation": rows, "train": rows[:10]}, num_fewshot or 0)
    if name == "hellaswag":
        docs = hellaswag_docs(data)
        return lm_eval_task("hellaswag/hellaswag.yaml", {"validation": docs, "train": docs[:10]}, num_fewshot or 0,
                            drop_process_docs=True)
    if name.startswith("mmlu_"):
        s = name[5:]
        test = mmlu_rows(os.path.join(data, f"mmlu/test/{s}_test.csv"))
        dev = mmlu_rows(os.path.join(data, f"mmlu/dev/{s}_dev.csv"))
        return lm_eval_task(f"mmlu/default/mmlu_{s}.yaml", {"test": test, "dev": dev}, 5 if num_fewshot is None else num_fewshot)
    if name == "gsm8k":
        test = [json.loads(l) for l in open(os.path.join(data, "gsm8k/test.jsonl"), encoding="utf-8")]
        train = [json.loads(l) for l in open(os.path.join(data, "gsm8k/train.jsonl"), encoding="utf-8")]
        return lm_eval_task("gsm8k/gsm8k.yaml", {"test": test, "train": train}, 5 if num_fewshot is None else num_fewshot)
    if name == "wikitext":
        pages = wikitext_pages(os.path.join(data, "wikitext2_raw/wiki.test.raw"))
        return lm_eval_task("wikitext/wikitext.yaml", {"test": [{"page": p} for p in pages], "train": [{"page": "x"}]}, 0)
    raise ValueError(f"no local data for lm-eval task {name}")

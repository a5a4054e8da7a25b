"""test_eval_prompts.py — assay's task prompts against lm-evaluation-harness itself.

`assay eval --dump-requests` writes every request assay would score (context, continuations, gold, gsm8k
targets, wikitext targets with word/byte counts). The installed lm-eval package (scripts/requirements-test.txt)
builds the same tasks from its own yaml configs, fed the bundled data through `custom_dataset` (no network),
and this test demands string-for-string equality of what the two produce:
  - arc_challenge 0-shot, and 3-shot with Dev standing in for the unbundled train split (checks the sampler);
  - piqa 0-shot; hellaswag 0-shot (the bundled file is already preprocessed, so lm-eval's process_docs is
    replaced by the identity on {query, choices, label});
  - mmlu 5-shot and 0-shot on several subjects (description, first_n dev shots, " A".." D" continuations);
  - gsm8k 5-shot: few-shot examples drawn by lm-eval's random.Random(1234) sampler from all 7473 train problems;
  - wikitext: lm-eval's wikitext_detokenizer and process_results word/byte counts on the document-level pages.
Exit code 0 = all equal.
"""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TQDM_DISABLE", "1")
import logging

logging.disable(logging.WARNING)

from lmeval_local import arc_rows, hellaswag_docs, lm_eval_task, mmlu_rows, piqa_rows, wikitext_pages  # noqa: E402
import testlib  # noqa: E402
from testlib import check  # noqa: E402

SHARED = os.environ["ASSAY_SHARED"]
DATA = os.path.join(SHARED, "data")
BIN = os.environ["ASSAY_BIN"]




def dump(tasks, limit, fewshot=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "req.jsonl")
        cmd = [BIN, "eval", "--tasks", tasks, "--dump-requests", out, "--quiet", "--data-dir", DATA]
        if limit:
            cmd += ["--limit", str(limit)]
        if fewshot is not None:
            cmd += ["--num-fewshot", str(fewshot)]
        subprocess.run(cmd, check=True, capture_output=True)
        rows = [json.loads(l) for l in open(out, encoding="utf-8")]
    by = {}
    for r in rows:
        by.setdefault(r["task"], []).append(r)
    return by


def requests_of(task, limit):
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    by = {}
    for ins in task.instances:
        by.setdefault(ins.doc_id, []).append(ins)
    return by


def compare_mc(name, ours, task, limit):
    reqs = requests_of(task, limit)
    check(len(reqs) == len(ours), f"{name}: {len(reqs)} lm-eval docs vs {len(ours)} ours")
    docs = list(task.eval_docs)
    for r in ours:
        ins = sorted(reqs.get(r["doc_id"], []), key=lambda i: i.idx)
        ctxs = {i.args[0] for i in ins}
        conts = [i.args[1] for i in ins]
        ok = len(ctxs) == 1 and r["context"] in ctxs and conts == r["continuations"]
        check(ok, f"{name} doc {r['doc_id']}: prompt differs\n ours: {r['context']!r} {r['continuations']!r}\n lm-eval: {ctxs!r} {conts!r}")
        gold = task.doc_to_target(docs[r["doc_id"]])
        check(gold == r["gold"], f"{name} doc {r['doc_id']}: gold {r['gold']} vs lm-eval {gold}")
        if not ok:
            return


def test_arc():
    test = arc_rows(os.path.join(DATA, "arc_challenge/ARC-Challenge-Test.4opt_subset.jsonl"))
    dev = arc_rows(os.path.join(DATA, "arc_challenge/ARC-Challenge-Dev.4opt_subset.jsonl"))
    for k, limit in ((0, 300), (3, 40)):
        ours = dump("arc_challenge", limit, k)["arc_challenge"]
        t = lm_eval_task("arc/arc_challenge.yaml", {"test": test, "train": dev}, k)
        compare_mc(f"arc_challenge {k}-shot", ours, t, limit)


def test_piqa():
    rows = piqa_rows(DATA)
    ours = dump("piqa", 300)["piqa"]
    t = lm_eval_task("piqa/piqa.yaml", {"validation": rows, "train": rows[:10]}, 0)
    compare_mc("piqa", ours, t, 300)


def test_hellaswag():
    docs = hellaswag_docs(DATA)
    check(len(docs) == 10042, f"hellaswag: {len(docs)} tasks in the file")
    ours = dump("hellaswag", 300)["hellaswag"]
    t = lm_eval_task("hellaswag/hellaswag.yaml", {"validation": docs[:400], "train": docs[:10]}, 0, drop_process_docs=True)
    compare_mc("hellaswag", ours, t, 300)


def test_mmlu():
    subjects = ["abstract_algebra", "high_school_european_history", "us_foreign_policy", "moral_scenarios",
                "college_mathematics"]
    for k, limit in ((5, 25), (0, 25)):
        ours = dump(",".join("mmlu_" + s for s in subjects), limit, k)
        for s in subjects:
            test = mmlu_rows(os.path.join(DATA, f"mmlu/test/{s}_test.csv"))
            dev = mmlu_rows(os.path.join(DATA, f"mmlu/dev/{s}_dev.csv"))
            t = lm_eval_task(f"mmlu/default/mmlu_{s}.yaml", {"test": test, "dev": dev}, k)
            compare_mc(f"mmlu_{s} {k}-shot", ours["mmlu_" + s], t, limit)


def test_gsm8k():
    test = [json.loads(l) for l in open(os.path.join(DATA, "gsm8k/test.jsonl"), encoding="utf-8")]
    train = [json.loads(l) for l in open(os.path.join(DATA, "gsm8k/train.jsonl"), encoding="utf-8")]
    limit = 60
    ours = dump("gsm8k", limit)["gsm8k"]
    t = lm_eval_task("gsm8k/gsm8k.yaml", {"test": test, "train": train}, 5)
    reqs = requests_of(t, limit)
    check(len(reqs) == len(ours), f"gsm8k: {len(reqs)} vs {len(ours)} docs")
    for r in ours:
        (ins,) = reqs[r["doc_id"]]
        ctx, gen = ins.args
        check(ctx == r["context"], f"gsm8k doc {r['doc_id']}: prompt differs\n ours: {r['context'][:300]!r}\n lm-eval: {ctx[:300]!r}")
        check(gen["until"] == r["until"], f"gsm8k doc {r['doc_id']}: until {gen['until']} vs {r['until']}")
        check(t.doc_to_target(test[r["doc_id"]]) == r["target"], f"gsm8k doc {r['doc_id']}: target differs")
        if ctx != r["context"]:
            break


def test_wikitext():
    pages = wikitext_pages(os.path.join(DATA, "wikitext2_raw/wiki.test.raw"))
    check(len(pages) == 62, f"wikitext: {len(pages)} documents (62 expected)")
    ours = dump("wikitext", 0)["wikitext"]
    t = lm_eval_task("wikitext/wikitext.yaml", {"test": [{"page": p} for p in pages], "train": [{"page": "x"}]}, 0)
    check(len(ours) == len(pages), f"wikitext: {len(ours)} documents from assay")
    for r, page in zip(ours, pages):
        doc = {"page": page}
        target = t.doc_to_target(doc)
        check(target == r["target"], f"wikitext doc {r['doc_id']}: detokenized text differs")
        counts = t.process_results(doc, [-1.0])
        check(counts["word_perplexity"][1] == r["words"], f"wikitext doc {r['doc_id']}: words {r['words']} vs {counts['word_perplexity'][1]}")
        check(counts["byte_perplexity"][1] == r["bytes"], f"wikitext doc {r['doc_id']}: bytes {r['bytes']} vs {counts['byte_perplexity'][1]}")


for fn in (test_arc, test_piqa, test_hellaswag, test_mmlu, test_gsm8k, test_wikitext):
    before = testlib.failures
    fn()
    print(f"{fn.__name__}: {'ok' if testlib.failures == before else 'FAILED'}")
testlib.finish()

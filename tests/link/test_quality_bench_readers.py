"""bench/quality.py reads public sets a user downloads (SICK, LoCoMo): their readers, on files of the same shape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("bench_quality", Path(__file__).parents[2] / "bench" / "quality.py")
quality = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quality)


def test_sick_rows_read_both_headers_and_keep_the_asked_sets(tmp_path):
    full = tmp_path / "SICK.txt"
    full.write_text(
        "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\tSemEval_set\n"
        "4\tThe boys are playing outdoors\tThere is no boy playing outdoors\tCONTRADICTION\t3.6\tA_contradicts_B\tB_contradicts_A\tTRIAL\n"
        "5\tA man is cooking\tA man is cooking food\tENTAILMENT\t4.5\tA_entails_B\tB_neutral_A\tTRAIN\n"
        "6\tTwo dogs are fighting\tTwo dogs are wrestling\tNEUTRAL\t4\tA_neutral_B\tB_neutral_A\tTEST\n",
        encoding="utf-8",
    )
    rows = quality.sick_rows(full, {"TEST", "TRIAL"})
    assert [(r["id"], r["label"]) for r in rows] == [("sick4", "CONTRADICTION"), ("sick6", "NEUTRAL")]
    assert rows[0]["b"] == "There is no boy playing outdoors"
    semeval = tmp_path / "SICK_test_annotated.txt"
    semeval.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                       "7\tA man is walking outside\tThere is no man walking outside\t3.5\tCONTRADICTION\n"
                       "7\tA man is walking outside\tThere is no man walking outside\t3.5\tCONTRADICTION\n",  # listed twice
                       encoding="utf-8")
    assert quality.sick_rows(semeval, {"TEST"}) == [
        {"id": "sick7", "a": "A man is walking outside", "b": "There is no man walking outside", "label": "CONTRADICTION"}
    ]


LOCOMO = [{
    "sample_id": "conv-1",
    "qa": [{"question": "What did Ana adopt?", "answer": "a cat", "evidence": ["D1:2"], "category": 1},
           {"question": "Who is Ana?", "answer": "x", "evidence": ["D9:1"], "category": 1},  # a turn not read
           {"question": "Would Ana like dogs?", "answer": "x", "evidence": [], "category": 3}],
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ana", "dia_id": f"D1:{k}", "text": f"turn {k}"} for k in range(1, 11)],
        "session_2_date_time": "10:37 am on 27 June, 2023",
    },
    "observation": {"session_1_observation": {"Ana": [["Ana adopted a cat.", "D1:2"], ["Two turns.", ["D1:1", "D1:3"]],
                                                      ["Two in one string.", "D1:4; D1:5"]]}},
}]


def test_locomo_rows_date_turns_by_session_and_facts_only_when_asked(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    dated = quality.locomo_rows(path, dated=True)
    turns = [r for r in dated if r["tier"] == "episodic"]
    facts = [r for r in dated if r["tier"] == "semantic"]
    assert len(turns) == 10 and {r["timestamp"] for r in turns} == {"2023-05-08T13:56:00"}
    assert turns[1]["content"] == "Ana: turn 2" and turns[1]["session_id"] == "conv-1:1"
    assert [(f["content"], f["source"], f["timestamp"]) for f in facts] == [("Ana adopted a cat.", "conv-1:D1:2", "2023-05-08T13:56:00")]
    assert [f["timestamp"] for f in quality.locomo_rows(path, dated=False) if f["tier"] == "semantic"] == [None]
    questions, evidence, namespace_of = quality.locomo_questions(path, {r["id"] for r in turns})
    assert list(questions.values()) == ["What did Ana adopt?"]
    assert list(evidence.values()) == [{"conv-1:D1:2"}] and set(namespace_of.values()) == {"conv-1"}


def test_locomo_evidence_may_list_several_turns_in_one_string():
    assert quality.dia_ids("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert quality.dia_ids(["D1:1", "D1:3,D1:4"]) == ["D1:1", "D1:3", "D1:4"]
    assert quality.dia_ids(None) == []

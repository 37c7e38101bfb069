"""Contradiction precision: value sets per subject, negation scope, temporal "since" (one pair at a time)."""

from __future__ import annotations

import pytest

from crosstier.core.config import ScoringConfig
from links_helpers import at, memories, same, vectors
from crosstier.transforms.link.features import causal_cue, negated_terms, value_terms
from crosstier.transforms.link.links import scored_links

DEFAULT = ScoringConfig()


def pair_link(a: dict, b: dict) -> dict:
    """The one link between two memories with cosine 1 (the semantic gate of contradicts always passes)."""
    links = scored_links(memories({"id": "a", **a}, {"id": "b", **b}), same(2), DEFAULT)
    assert links.height == 1, links
    return links.row(0, named=True)


def fact(content: str, **extra) -> dict:
    return {"tier": "semantic", "content": content, **extra}


# Pairs that say the same thing (or do not disagree) although one side gives more numbers, a version
# with more precision, or words its negation differently.
NOT_CONTRADICTIONS = [
    pytest.param(
        fact("Python 3.11 and Python 3.12 pass CI on Node 20"),
        fact("Python 3.11 passes CI on Node 18 and Node 20"),
        id="each-side-lists-a-value-the-other-does-not",
    ),
    pytest.param(
        fact("Recall@10 against exact search: 0.962 with ef_search = 40 and 0.991 with 100. p95 is 9 ms vs 21 ms."),
        fact("HNSW vs exact search: recall@10 0.962 at ef_search = 40, 0.991 at 100; p95 latency 9 ms vs 21 ms."),
        id="same-figures-logged-twice",
    ),
    pytest.param(
        fact("The reporting store runs Postgres 15.6 with pgbouncer 1.21"),
        fact("The reporting store runs Postgres 15 with pgbouncer 1.21"),
        id="version-given-with-more-precision",
    ),
    pytest.param(
        fact("The deploy tool is pinned to v2.9"),
        fact("The deploy tool is pinned to 2.9.1"),
        id="version-with-v-prefix-and-patch",
    ),
    pytest.param(
        fact("Alerts are grouped by service rather than by host"),
        fact("Alerts are grouped by service, not by host"),
        id="rather-than-vs-not",
    ),
    pytest.param(
        fact("Invoices are exported as CSV instead of PDF files"),
        fact("Invoices are exported as CSV, never as PDF files"),
        id="instead-of-vs-never",
    ),
    pytest.param(
        fact("The CI role had no write access to the registry; we granted it to that role only."),
        fact("The CI role lacked write access to the registry, so we granted it to that role only."),
        id="had-no-vs-lacked",
    ),
    pytest.param(
        {"tier": "procedural", "content": "Cluster upgrade: check the node logs first, no restarts during business hours"},
        {"tier": "procedural", "content": "Cluster upgrade: 1. Check the node logs. 2. No restarts during business "
                                          "hours without a health check"},
        id="twin-negates-a-word-the-other-uses-in-another-sense",
    ),
    pytest.param(
        fact("Deploys run on Mondays from the release branch"),
        fact("Deploys run on Mondays from the release branch, never during holidays"),
        id="negation-of-something-the-other-does-not-state",
    ),
    pytest.param(
        fact("Staging deploys are not allowed during the freeze window"),
        fact("No staging deploys during the freeze window"),
        id="both-negate",
    ),
    # a negation answered by a word that states the absence: a double negative, the same claim
    pytest.param(fact("Nobody is in the meeting room"), fact("The meeting room is empty"), id="nobody-vs-empty"),
    pytest.param(fact("The store is not open on Sundays"), fact("The store is closed on Sundays"), id="not-open-vs-closed"),
    pytest.param(fact("Maya does not like tabs"), fact("Maya dislikes tabs"), id="not-like-vs-dislikes"),
]


@pytest.mark.parametrize(("a", "b"), NOT_CONTRADICTIONS)
def test_not_a_contradiction(a, b):
    link = pair_link(a, b)
    assert link["relationship_type"] != "contradicts", link["reason"]


CONTRADICTIONS = [
    pytest.param(fact("User prefers tabs"), fact("User no longer prefers tabs"), "negation (no longer)", id="no-longer"),
    pytest.param(fact("Deploys run on Fridays"), fact("Deploys never run on Fridays"), "negation (never)", id="never"),
    pytest.param(fact("The API uses Python 3.11"), fact("The API uses Python 3.12"), "3.11 vs 3.12", id="version"),
    pytest.param(
        fact("The reporting store runs Postgres 15.6"), fact("The reporting store runs Postgres 16"), "15.6 vs 16",
        id="version-not-a-refinement",
    ),
    pytest.param(
        fact("Python 3.11 and Python 3.12 pass CI"), fact("Python 3.10 passes CI"), "3.11, 3.12 vs 3.10",
        id="disjoint-value-sets",
    ),
    pytest.param(
        fact("The CI role has write access to the registry"), fact("The CI role lacks write access to the registry"),
        "negation (lacks)", id="lexical-negation",
    ),
    pytest.param(
        fact("Alerts are grouped by host"), fact("Alerts are grouped by service rather than by host"),
        "negation (rather than)", id="rather-than",
    ),
    pytest.param(
        fact("Maya drinks coffee every morning"), fact("Maya doesn't drink coffee anymore"), "negation (n't)",
        id="contraction-with-filler",
    ),
    # the negated word itself is the absence: still a conflict
    pytest.param(fact("The water tank is empty"), fact("The water tank is not empty"), "negation (not)", id="not-empty-vs-empty"),
    # a weekday alone is a value of its subject, not date noise of a carried-forward copy
    pytest.param(fact("The gym class is on Tuesday"), fact("The gym class is on Thursday"), "tuesday vs thursday",
                 id="weekday"),
]


@pytest.mark.parametrize(("a", "b", "reason"), CONTRADICTIONS)
def test_contradiction(a, b, reason):
    link = pair_link(a, b)
    assert (link["relationship_type"], link["reason"]) == ("contradicts", f"Contradiction: {reason}")
    assert (link["source_id"], link["target_id"]) == ("a", "b")


def test_negation_evidence_is_phrases_and_the_terms_stated_outside_negation():
    cue, phrases, stated, scope = negated_terms("Maya no longer prefers tabs for indentation; she uses spaces.")
    assert cue == "no longer"
    assert phrases == ["prefer tab"]
    assert "tab" not in stated and "indent" not in stated and "spac" in stated
    assert scope == ["indent", "prefer", "tab"]


def test_a_hypothetical_clause_is_a_scope_and_its_negation_no_phrase():
    cue, phrases, stated, scope = negated_terms("Anyone else would quit by now. I keep running marathons.")
    assert (cue, phrases) == (None, []) and "quit" in scope and "quit" not in stated and "marathon" in stated
    cue, phrases, _, _ = negated_terms("It would not surprise me. She does not drink coffee.")
    assert cue == "not" and phrases == ["drink coffe"]  # the supposing clause's negation makes no phrase
    # a text that denies something keeps every word it states, so its subject is not made shorter
    _, _, stated, scope = negated_terms("The match would move indoors. She does not drink coffee.")
    assert {"match", "indoor"} <= set(stated) and "match" not in scope
    _, _, stated, scope = negated_terms("The match would move indoors. She drinks coffee.")
    assert "match" in scope and "match" not in stated


def test_values_keep_every_value_of_a_subject():
    assert value_terms("CI tests Python 3.11 and 3.12, deploy tool v2.9") == ["python=3.11", "python=3.12", "tool=2.9"]


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("The dashboard runs React 19 since PR #482 (2026-11-11).", None),
        ("p99 has been high since 09:10", None),
        ("Nothing changed since March", None),
        ("We have pinned it since v3.12.1", None),
        ("The build has been red since last week", None),
        ("It has been flaky ever since", None),
        ("We rolled back since the migration failed on staging", "since"),
        ("We rolled back because the migration failed", "because"),
        ("It was red since yesterday because the cache expired", "because"),
    ],
)
def test_temporal_since_is_not_a_causal_cue(text, cue):
    assert causal_cue(text)[0] == cue


def test_since_a_pr_does_not_make_a_causal_link():
    link = pair_link(
        {"tier": "episodic", "content": "Merged #482: the dashboard is on React 19 now", "timestamp": at(0)},
        {"tier": "episodic", "content": "The dashboard runs React 19 since PR #482", "timestamp": at(2)},
    )
    assert link["relationship_type"] != "causal"


# Issue 12: contradictions where the subject is clearly shared: antonyms of state, a different
# agent or object in the same event, "nobody" as negation; and their look-alikes that are no conflict.
@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("A boy is sitting on the bench", "A boy is standing on the bench", "Contradiction: opposite sit"),
        ("The children are playing indoors", "The children are playing outdoors", "Contradiction: opposite indoor"),
        ("The glass on the table is full", "The glass on the table is empty", "Contradiction: opposite full"),
        ("A woman is slicing an onion", "Nobody is slicing an onion", "Contradiction: negation (nobody)"),
        # opposite actions and places (SICK's contradictions without a negation)
        ("A man is filling a plastic container", "A man is emptying a plastic container", "Contradiction: opposite fill"),
        ("A boy is running towards the fishing line", "A boy is running away from the fishing line",
         "Contradiction: opposite toward"),
        # a particle that says the opposite state of one verb (not a particle alone: "on Friday")
        ("Dark mode is turned on in the admin console", "Dark mode was switched off in the admin console", "Contradiction: opposite turn on"),
        ("A woman is taking off a large cloak", "A woman is putting on a large cloak", "Contradiction: opposite put on"),
        # a word naming a person is one word when a negation is matched, the kind it names stated by the other
        ("There is no man in a black jacket doing tricks on a motorbike",
         "A man in a black jacket is doing tricks on a motorbike", "Contradiction: negation (no)"),
        # a hat is no "hate": the negation is the conflict (SICK 7305), not an opposite "like"
        ("There is no man wearing a straw hat who is smoking a cigarette",
         "A man is wearing a straw hat and smoking a cigarette", "Contradiction: negation (no)"),
        # any person word is one subject: "person" and "a woman" (SICK)
        ("There is no person boiling noodles", "A woman is boiling noodles in water", "Contradiction: negation (no)"),
        # denying the less specific claim denies the more specific one, however much more it says
        ("No person is hiking", "A distant person with a blue backpack is hiking in a rocky area", "Contradiction: negation (no)"),
        # one word of the denied claim said in other words, the two texts close in meaning
        ("There is no chef preparing a meal", "A chef is preparing some food", "Contradiction: negation (no)"),
        ("There is no man putting some cheese on a pizza", "The man is sprinkling cheese on the pizza", "Contradiction: negation (no)"),
        # opposites across two pairs' words, an aim met or missed, a request answered (SICK: 717, 2972, 2089, 8263)
        ("A few men in a competition are running outside", "A few men in a competition are running indoors",
         "Contradiction: opposite indoor"),
        ("A large green ball is hitting a potato", "A big green ball is missing a potato", "Contradiction: opposite hit"),
        ("The man is denying an interview", "The man is granting an interview", "Contradiction: opposite grant"),
        ("Some people and vehicles are on a crowded street", "Some people and vehicles are on an almost empty street",
         "Contradiction: opposite crowded"),
        # "failing to" denies as "not" does; a measure ("a piece of") is not part of the denied claim;
        # friends / enemies, rising / falling, holding up / putting down (SICK TEST 900, 4206, 9320, 9378, 6498)
        ("A man in a blue jumpsuit is failing to perform a wheelie on a motorcycle",
         "A man in a blue jumpsuit is courageously performing a wheelie on a motorcycle", "Contradiction: negation (failing to)"),
        ("Nobody is slicing a piece of bread", "A man is slicing some bread", "Contradiction: negation (nobody)"),
        ("Three friends are making faces for the camera", "Three enemies are making faces for the camera",
         "Contradiction: opposite friend"),
        ("A man in green is rising up from the grass", "A man in green is falling down on the grass", "Contradiction: opposite rise"),
        ("A man is putting down an electronic device", "A man is holding up an electronic device", "Contradiction: opposite pick up"),
        # where one looks, and make-up put on or taken off (SICK TEST 6663, 7096, 7360, 3119)
        ("Two young women with folded arms are looking away from the screen",
         "Two young women with folded arms are looking at the screen", "Contradiction: opposite look at"),
        ("An oriental man and two women are turning their backs to the camera", "An oriental man and two women are facing a camera",
         "Contradiction: opposite look at"),
        ("A woman is applying cosmetics to her eyelid", "A woman is removing cosmetics from her eyelid", "Contradiction: opposite apply"),
    ],
)
def test_shared_subject_contradictions(a, b, reason):
    link = pair_link(fact(a), fact(b))
    assert (link["relationship_type"], link["reason"]) == ("contradicts", reason)


AGENT_SWAPS = [
    ("A man is playing the guitar", "A woman is playing the guitar", "Contradiction: male vs female"),
    ("A dog is chasing a ball in the park", "A cat is chasing a ball in the park", "Contradiction: dog vs cat"),
]


@pytest.mark.parametrize(("a", "b", "reason"), AGENT_SWAPS)
def test_a_different_agent_at_the_same_moment_is_a_contradiction(a, b, reason):
    link = pair_link(fact(a, timestamp=at(3)), fact(b, timestamp=at(3)))
    assert (link["relationship_type"], link["reason"]) == ("contradicts", reason)


@pytest.mark.parametrize(("a", "b", "reason"), AGENT_SWAPS)
def test_a_different_agent_is_no_contradiction_unless_one_moment_says_it_is_one_event(a, b, reason):
    """Text alone cannot say two descriptions are of one event: "A boy is standing next to the
    fountain" / "A girl is standing next to the fountain" may both be true (SICK labels every such
    pair neutral); an hour apart, they are two events."""
    assert pair_link(fact(a), fact(b))["relationship_type"] != "contradicts"
    assert pair_link(fact(a, timestamp=at(3)), fact(b, timestamp=at(4)))["relationship_type"] != "contradicts"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("A boy is sitting on the bench", "A young boy sits on a park bench"),
        ("A man and a woman are dancing", "A woman is dancing"),  # one side names both: meets either
        ("The user's son plays football on Saturdays", "The user's daughter plays football on Saturdays"),
        ("A man is walking outside", "A man is walking outdoors on the street"),
        # denying a more specific claim does not deny the less specific one
        ("There is no man riding an electric bicycle", "A man is riding a bicycle"),
        ("We do not deploy on Fridays during the freeze", "We deploy on Fridays"),
        # a double negative: "did not renew" says what "forgot to renew" says
        ("The user did not renew the passport", "The user forgot to renew the passport"),
        # the negating side's own subject is not the other's: a squirrel is one animal, the
        # children may not be the boys, the young boy may not be the child (SICK: neutral)
        ("The squirrel is not running in circles", "An animal is running in circles"),
        ("The children aren't playing in front of a large door", "A group of boys are playing with a ball in front of a large door"),
        ("A child is running in and out of the ocean waves", "The young boy is not running through the ocean waves"),
        # a denied claim of one word is not "reworded" by any other word (LoCoMo: a chat turn and its reply)
        ("Nature and quality time, can't beat it!", "It's great that you get to spend quality time in nature, so calming"),
        ("The standup is on Friday", "The standup was called off"),
        # an exhortation denies nothing (LoCoMo: a friend's encouragement and the fact drawn from it)
        ("Don't let the bumps in the road bring you down, keep going for your dreams",
         "Gina tells Jon to keep going for his dreams, even when facing bumps in the road"),
        # a clause that supposes or advises states nothing a negation could deny (LoCoMo conv-30)
        ("Thanks, Gina! I won't quit. I'm gonna keep going, whatever comes my way.",
         "You should get to the point where anyone else would quit and you're not going to stop there."),
        ("The release isn't ready", "If the release is ready, tag it"),
        # the opposites alone are not a shared subject: the rest must describe one scene (SICK: neutral)
        ("A boy in a swimsuit is sitting on a circular fountain", "A boy is standing next to the opening of a fountain"),
        # a negation of one kind of person denies nothing of a person of another kind, or of any
        # person (SICK labels 12 of 14 such pairs neutral: 1374, 5044, 5433)
        ("There is no man in a black jacket doing tricks on a motorbike",
         "A person in a black jacket is doing tricks on a motorbike"),
        ("There is no woman cutting an onion", "A man is cutting onions"),
        ("There is no man reading the email", "Someone is reading the email"),
        # one act in two words, neither denied; a miss is a "did not hit"
        ("The lady is slicing a tomato", "A woman is cutting a tomato"),
        ("The ball did not hit the potato", "The ball missed the potato"),
        # a text that states both sides of an opposite claims neither (SICK TRIAL 6756, TEST 6679)
        ("One boy is sitting on the bench and another is standing on it", "A boy is standing on the bench"),
        # where one goes, and sizes: one may do both in turn, and two sizes may be two things
        # (SICK labels most of these neutral: 3729, 3025, 5661)
        ("Several swimmers are jumping into the water", "Several swimmers are jumping out of the water"),
        ("Some children are jumping off a trampoline", "Some children are jumping on a trampoline"),
        ("A cat is playing with a small bottle", "A cat is playing with a big bottle"),
    ],
)
def test_shared_subject_look_alikes_are_not_contradictions(a, b):
    assert pair_link(fact(a), fact(b))["relationship_type"] != "contradicts"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("billing-api uses ruff format now, no more black", "billing-api formats with ruff since PR #520; black is gone."),
        ("I want ruff format to replace black in billing-api", "billing-api uses ruff format now, no more black"),
        ("float round() is banned in billing-api", "Invoice tax in billing-api is rounded with Decimal, never float round()"),
        ("Jonas rejects hand-rolled form state", "Jonas asked for react-hook-form instead of hand-rolled form state"),
        # "float" is a type here, not a word with an opposite (the bundled sample's MEMORY.md and facts)
        ("Invoice tax lines are rounded one by one with Decimal and ROUND_HALF_UP; float round() is banned in billing-api",
         "Decisions: Invoice tax is rounded per line with ROUND_HALF_UP on Decimal, never float `round()`."),
    ],
)
def test_both_sides_negating_one_thing_in_other_words_is_no_contradiction(a, b):
    assert pair_link(fact(a), fact(b))["relationship_type"] != "contradicts"


@pytest.mark.parametrize(("cosine", "contradicts"), [(0.74, False), (0.76, True)])
def test_a_negation_with_one_word_reworded_needs_texts_close_in_meaning(cosine, contradicts):
    """"No chef preparing a meal" / "a chef is preparing some food" says one thing in other words;
    "no man playing a guitar" / "a man playing a piano", the same shape, says two (their cosine
    is lower): negation_paraphrase_min_cosine (0.75) tells them apart."""
    assert DEFAULT.negation_paraphrase_min_cosine == 0.75
    for a, b in (("There is no chef preparing a meal", "A chef is preparing some food"),
                 ("There is no man playing a guitar", "A man is playing a piano")):
        links = scored_links(memories({"id": "a", **fact(a)}, {"id": "b", **fact(b)}), vectors(cosine), DEFAULT)
        assert links.height == 1  # linked either way: only the type depends on the cosine
        assert (links.row(0, named=True)["relationship_type"] == "contradicts") == contradicts


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("The lady is slicing a tomato", "There is no one cutting a tomato", "Contradiction: negation (no one)"),
        ("A boy is looking at a calendar", "There is no boy checking a calendar", "Contradiction: negation (no)"),
        ("A man is slicing a potato into pieces", "A man is not cutting a potato", "Contradiction: negation (not)"),
        ("The woman is dicing onions", "There is no woman cutting an onion", "Contradiction: negation (no)"),
        ("There is no dog rolling from side to side", "A puppy is rolling from side to side on its back", "Contradiction: negation (no)"),
    ],
)
def test_a_negation_of_the_same_act_in_another_word_is_a_contradiction_without_a_paraphrase_cosine(a, b, reason):
    """The denied act said in a word of the same act (features._SAME_WORDS) is the act the other
    side states, so the negation denies it directly, at the cosines these pairs have (SICK's trial
    pairs 2404, 3941, 4831: 0.59-0.71), under the paraphrase rule's 0.75."""
    links = scored_links(memories({"id": "a", **fact(a)}, {"id": "b", **fact(b)}), vectors(0.65), DEFAULT)
    assert links.height == 1
    assert (links.row(0, named=True)["relationship_type"], links.row(0, named=True)["reason"]) == ("contradicts", reason)


def test_a_hat_is_no_hate_and_a_negated_person_keeps_its_kind():
    """Evidence behind the rules above: "hat" stems as "hate" does, but is no polar word and no
    refusal; "hates" still is. A negation naming a kind of person carries that kind in its
    phrase; one naming any person does not."""
    from crosstier.transforms.link.features import negative_states, polarity_marks

    assert polarity_marks("A man is wearing a hat") == []
    assert polarity_marks("The user hates spicy food") == ["like-", "love-"]
    _, _, stated, _ = negated_terms("A man is wearing a white hat")
    assert negative_states(stated) == []
    assert negative_states(negated_terms("The user hates spicy food")[2]) == ["hate"]
    assert negated_terms("There is no man playing a keyboard")[1] == ["person play sex=male"]
    assert negated_terms("There is no person playing a keyboard")[1] == ["person play"]
    assert negated_terms("There is no child playing a keyboard")[1] == ["person play"]


def test_a_failure_to_act_is_a_negation_whose_cue_is_no_part_of_the_claim():
    from crosstier.transforms.link.features import NEGATION_IGNORED

    assert negated_terms("The team was unable to reach the vendor")[:2] == ("unable to", ["reach vendor"])
    assert negated_terms("The deploy failed to start")[:2] == ("failed to", ["start"])
    # the cue's own word is in the scope; the other side need not state it
    assert {"fail", "unabl"} <= set(NEGATION_IGNORED)

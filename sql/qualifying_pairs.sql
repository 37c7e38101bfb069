-- purpose: the scored pairs that become links: score >= $min_score or an explicit reference, and
--          a cosine the model can vouch for (DESIGN.md, Scoring); classified_links types them
-- grain: one row per qualifying pair (pair_scores' columns)
-- inputs: pair_scores (sql/pair_scores.sql), link_memories (idx, latin_share)
-- Kept apart from the classification so a big namespace can be scored block by block and
-- pruned to the links that can survive the cap (transforms/link/cap_reach.py) before the
-- costlier classification joins each pair to its evidence.
with

pair_scores as (
    select * from pair_scores
),

memories as not materialized (
    select idx, latin_share from link_memories
),

above_threshold as (
    select * from pair_scores
    where score >= $min_score or cross_reference > 0
),

vouched as (
    -- a cosine the model cannot vouch for (a text mostly outside its language) makes no link on its
    -- own: such a pair needs an explicit reference or shared terms as well
    select s.*
    from above_threshold as s
    join memories as a on a.idx = s.a_idx
    join memories as b on b.idx = s.b_idx
    where least(a.latin_share, b.latin_share) >= $min_model_script_share
        or s.cross_reference > 0
        or s.co_occurrence >= $unvouched_min_co_occurrence
)

select * from vouched

-- purpose: the four score components of each candidate pair and the weighted score (DESIGN.md, Scoring)
-- grain: one row per candidate pair (a_idx < b_idx, so a_id < b_id), both ends in one namespace
-- inputs: pairs(a_idx, b_idx, cosine: exact, semantic: the calibrated map of the cosine, both from numpy;
--         shared_weight: the rarity weight of the terms both have, links.shared_term_weights),
--         link_memories(idx, id, namespace, timestamp, terms, term_weights, ref_ids, cites)
-- Each component is evidence on a 0-1 scale. co_occurrence is the rarity-weighted Jaccard of
-- the two term sets, full at $co_full, or the containment of the shorter one in the longer.
-- A component that cannot speak is null and drops out, the remaining weights rescaled to sum
-- to 1: temporal without two timestamps, cross_reference when neither memory cites anything.
with

pairs as (
    select a_idx, b_idx, cosine, semantic, shared_weight from pairs
),

memories as not materialized (
    select idx, id, namespace, timestamp, terms, term_weights, ref_ids, cites from link_memories
),

joined as (
    select
        p.a_idx,
        p.b_idx,
        p.cosine,
        p.semantic,
        a.id as a_id,
        b.id as b_id,
        a.namespace,
        a.timestamp as a_ts,
        b.timestamp as b_ts,
        -- rarity weight of the shared terms, and of each side's terms
        p.shared_weight,
        coalesce(list_sum(a.term_weights), 0.0) as a_weight,
        coalesce(list_sum(b.term_weights), 0.0) as b_weight,
        a.cites or b.cites as cites,
        list_contains(a.ref_ids, b.id) as a_refers_b,
        list_contains(b.ref_ids, a.id) as b_refers_a
    from pairs as p
    join memories as a on a.idx = p.a_idx
    join memories as b on b.idx = p.b_idx
    -- candidates are built within a namespace; this guard is kept out of the join
    -- condition (coalesce) so the planner joins on idx only and never pairs memories by namespace
    where coalesce(a.namespace = b.namespace and a.id <> b.id, false)
),

components as (
    select
        a_idx,
        b_idx,
        a_id,
        b_id,
        namespace,
        a_refers_b,
        b_refers_a,
        cosine,
        semantic,
        shared_weight,  -- kept: a dense namespace's held links are classified again with it (links._HELD_COLUMNS)
        -- Jaccard evidence, or containment evidence where one memory is much shorter: the
        -- Jaccard over its ceiling w(small) / w(large), up to shared / $co_shared_full
        -- (candidates.bounded_pairs bounds it by Calibration.co_occurrence_bound)
        case
            when a_weight + b_weight - shared_weight <= 0 or least(a_weight, b_weight) <= 0 then 0.0
            else greatest(
                least(1.0, shared_weight / (a_weight + b_weight - shared_weight) / $co_full),
                least(
                    1.0,
                    shared_weight / (a_weight + b_weight - shared_weight)
                        * greatest(a_weight, b_weight) / least(a_weight, b_weight) / $co_full,
                    shared_weight / $co_shared_full
                )
            )
        end as co_occurrence,
        case
            when a_ts is not null and b_ts is not null
                then exp(-abs(epoch(a_ts) - epoch(b_ts)) / (86400.0 * $tau_days))
        end as temporal,
        case
            when cites then least(1.0, (a_refers_b::integer + b_refers_a::integer) / $max_references::double)
        end as cross_reference
    from joined
),

final as (
    select
        *,
        coalesce(
            (
                $w_semantic * semantic
                + $w_co_occurrence * co_occurrence
                + coalesce($w_temporal * temporal, 0.0)
                + coalesce($w_cross_reference * cross_reference, 0.0)
            ) / nullif(
                $w_semantic + $w_co_occurrence
                + case when temporal is not null then $w_temporal else 0.0 end
                + case when cross_reference is not null then $w_cross_reference else 0.0 end,
                0.0
            ),
            0.0
        ) as score
    from components
)

select * from final

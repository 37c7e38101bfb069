-- purpose: the four score components of each candidate pair and the weighted score (DESIGN.md, Scoring)
-- grain: one row per candidate pair (a_idx < b_idx, so a_id < b_id), both ends in one namespace
-- inputs: pairs(a_idx, b_idx, cosine: exact, from numpy), link_memories(idx, id, namespace, timestamp, terms, ref_ids)
-- A component that does not apply (temporal without two timestamps) is null and drops
-- out: the remaining weights are rescaled to sum to 1.
with

pairs as (
    select a_idx, b_idx, cosine from pairs
),

memories as not materialized (
    select idx, id, namespace, timestamp, terms, ref_ids from link_memories
),

joined as (
    select
        p.a_idx,
        p.b_idx,
        p.cosine,
        a.id as a_id,
        b.id as b_id,
        a.namespace,
        a.timestamp as a_ts,
        b.timestamp as b_ts,
        a.terms as a_terms,
        b.terms as b_terms,
        len(list_intersect(a.terms, b.terms)) as n_shared,
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
        greatest(0.0, cosine) as semantic,
        case
            when len(a_terms) + len(b_terms) = 0 then 0.0
            else n_shared / (len(a_terms) + len(b_terms) - n_shared)
        end as co_occurrence,
        case
            when a_ts is not null and b_ts is not null
                then exp(-abs(epoch(a_ts) - epoch(b_ts)) / (86400.0 * $tau_days))
        end as temporal,
        least(1.0, (a_refers_b::integer + b_refers_a::integer) / $max_references::double) as cross_reference
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
                + $w_cross_reference * cross_reference
            ) / nullif(
                $w_semantic + $w_co_occurrence + $w_cross_reference
                + case when temporal is not null then $w_temporal else 0.0 end,
                0.0
            ),
            0.0
        ) as score
    from components
)

select * from final

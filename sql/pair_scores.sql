-- purpose: the four score components of each candidate pair and the weighted score (DESIGN.md, Scoring)
-- grain: one row per candidate pair (a_idx < b_idx, so a_id < b_id), both ends in one namespace
-- inputs: pairs(a_idx, b_idx, cosine), link_memories(idx, id, ... link_features columns)
-- A component that does not apply (temporal without two timestamps) is null and drops
-- out: the remaining weights are rescaled to sum to 1.
with

pairs as (
    select a_idx, b_idx, cosine from pairs
),

memories as (
    select * from link_memories
),

joined as (
    select
        p.cosine,
        a.id as a_id, a.tier as a_tier, a.namespace as a_namespace, a.timestamp as a_ts,
        a.session_id as a_session, a.content as a_content, a.terms as a_terms, a.ref_ids as a_refs,
        a.negation as a_negation, a.polarity as a_polarity, a.polarity_flip as a_polarity_flip,
        a.vals as a_vals, a.subject_terms as a_subject, a.causal_cue as a_cue, a.cause_terms as a_cause,
        b.id as b_id, b.tier as b_tier, b.namespace as b_namespace, b.timestamp as b_ts,
        b.session_id as b_session, b.content as b_content, b.terms as b_terms, b.ref_ids as b_refs,
        b.negation as b_negation, b.polarity as b_polarity, b.polarity_flip as b_polarity_flip,
        b.vals as b_vals, b.subject_terms as b_subject, b.causal_cue as b_cue, b.cause_terms as b_cause
    from pairs as p
    join memories as a on a.idx = p.a_idx
    join memories as b on b.idx = p.b_idx
    where a.namespace = b.namespace and a.id <> b.id
),

components as (
    select
        *,
        list_intersect(a_terms, b_terms) as shared_terms,
        greatest(0.0, cosine) as semantic,
        case
            when len(a_terms) + len(b_terms) = 0 then 0.0
            else len(list_intersect(a_terms, b_terms))
                / (len(a_terms) + len(b_terms) - len(list_intersect(a_terms, b_terms)))
        end as co_occurrence,
        case
            when a_ts is not null and b_ts is not null
                then exp(-abs(epoch(a_ts) - epoch(b_ts)) / (86400.0 * $tau_days))
        end as temporal,
        list_contains(a_refs, b_id) as a_refers_b,
        list_contains(b_refs, a_id) as b_refers_a
    from joined
),

final as (
    select
        *,
        least(1.0, (a_refers_b::integer + b_refers_a::integer) / $max_references::double) as cross_reference,
        coalesce(
            (
                $w_semantic * semantic
                + $w_co_occurrence * co_occurrence
                + coalesce($w_temporal * temporal, 0.0)
                + $w_cross_reference * least(1.0, (a_refers_b::integer + b_refers_a::integer) / $max_references::double)
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

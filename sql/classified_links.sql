-- purpose: the pairs that become links (score >= $min_score, or an explicit reference), each with
--          its relationship type, direction and reason (DESIGN.md, Relationship types)
-- grain: one row per linked pair, stored as a directed edge source_id -> target_id
--        (contradicts: once, source_id < target_id)
-- input: pair_scores (sql/pair_scores.sql)
with

pair_scores as (
    select * from pair_scores
),

kept as (
    -- prune before classifying: only pairs that will be published are classified
    select * from pair_scores
    where score >= $min_score or cross_reference > 0
),

evidence as (
    select
        *,
        case
            when a_ts is not null and b_ts is not null and a_ts <> b_ts then a_ts < b_ts
        end as a_strictly_earlier,
        case
            when a_ts is not null and b_ts is not null and a_ts <> b_ts then a_ts < b_ts
            when a_ts is not null and b_ts is null then true
            when a_ts is null and b_ts is not null then false
            else a_id < b_id
        end as a_first,
        coalesce(a_session = b_session, false) as same_session,
        coalesce(
            len(list_intersect(a_subject, b_subject))
            / nullif(len(a_subject) + len(b_subject) - len(list_intersect(a_subject, b_subject)), 0),
            0.0
        ) as subject_overlap,
        len(a_vals) > 0 and len(b_vals) > 0 and a_vals <> b_vals as value_conflict,
        list_has_any(a_polarity, b_polarity_flip) as antonym_conflict,
        (a_negation is null) <> (b_negation is null) as negation_conflict,
        case
            when a_tier = 'semantic' and b_tier = 'episodic' then
                a_refers_b or coalesce(b_ts <= a_ts, false)
            when a_tier = 'episodic' and b_tier = 'semantic' then
                b_refers_a or coalesce(a_ts <= b_ts, false)
        end as episode_is_origin
    from kept
),

rules as (
    select
        *,
        semantic >= $contradiction_min_semantic
            and subject_overlap >= $contradiction_min_overlap
            and (value_conflict or antonym_conflict or negation_conflict) as is_contradiction,
        coalesce(a_strictly_earlier and b_cue is not null and list_has_any(b_cause, a_terms), false) as a_causes_b,
        coalesce(not a_strictly_earlier and a_cue is not null and list_has_any(a_cause, b_terms), false) as b_causes_a,
        a_tier = 'episodic' and b_tier = 'episodic' and (
            same_session
            or coalesce(abs(epoch(a_ts) - epoch(b_ts)) <= 3600.0 * $sequence_max_hours, false)
        ) as is_sequence
    from evidence
),

typed as (
    -- the rules of DESIGN.md in order: the first that holds names the type
    select
        *,
        case
            when is_contradiction then 'contradicts'
            when a_causes_b or b_causes_a then 'causal'
            when is_sequence then 'temporal_sequence'
            when episode_is_origin then 'derives_from'
            when episode_is_origin is not null then 'supports'
            when (a_tier = 'procedural') <> (b_tier = 'procedural') then 'generalizes'
            else 'references'
        end as relationship_type
    from rules
),

directed as (
    select
        *,
        case relationship_type
            when 'contradicts' then a_id < b_id
            when 'causal' then a_causes_b
            when 'temporal_sequence' then a_first
            when 'derives_from' then a_tier = 'semantic'
            when 'supports' then a_tier = 'episodic'
            when 'generalizes' then a_tier = 'procedural'
            else a_refers_b or not b_refers_a
        end as a_is_source,
        list_sort(list_transform(
            shared_terms,
            lambda t: case when regexp_full_match(t, '[a-z]+') then '1' else '0' end
                || lpad((999 - length(t))::varchar, 3, '0') || t
        ))[1][5:] as best_term
    from typed
),

reasoned as (
    select
        *,
        case
            when relationship_type = 'contradicts' then
                'Contradiction: ' || case
                    when value_conflict then
                        coalesce(nullif(array_to_string(list_filter(a_vals, lambda v: not list_contains(b_vals, v)), ', '), ''), '-')
                        || ' vs '
                        || coalesce(nullif(array_to_string(list_filter(b_vals, lambda v: not list_contains(a_vals, v)), ', '), ''), '-')
                    when antonym_conflict then
                        'opposite ' || regexp_replace(list_intersect(a_polarity, b_polarity_flip)[1], '[+-]$', '')
                    else 'negation (' || coalesce(a_negation, b_negation) || ')'
                end
            when relationship_type = 'causal' then
                'Causal cue: ' || case when a_causes_b then b_cue else a_cue end
            when relationship_type = 'temporal_sequence' then
                case when same_session then 'Sequential session' else 'Close in time' end
            when cross_reference > 0 then 'Explicit reference'
            when best_term is not null
                and $w_co_occurrence * co_occurrence >= $w_semantic * semantic
                and $w_co_occurrence * co_occurrence >= $w_temporal * coalesce(temporal, 0.0) then
                'Entity match: ' || coalesce(
                    nullif(regexp_extract(
                        case when a_is_source then a_content else b_content end,
                        '(?i)' || regexp_escape(best_term) || '[\w-]*'
                    ), ''),
                    best_term
                )
            when $w_temporal * coalesce(temporal, 0.0) > $w_semantic * semantic then 'Close in time'
            else 'Content similarity'
        end as reason
    from directed
),

final as (
    select
        case when a_is_source then a_id else b_id end as source_id,
        case when a_is_source then a_tier else b_tier end as source_tier,
        case when a_is_source then b_id else a_id end as target_id,
        case when a_is_source then b_tier else a_tier end as target_tier,
        relationship_type,
        score,
        semantic,
        co_occurrence,
        temporal,
        cross_reference,
        reason,
        'discovered' as origin,
        a_namespace as namespace,
        null::varchar as run_id,
        null::varchar as metadata
    from reasoned
)

select * from final

-- purpose: the links touching the given memories, each seen from the given end, as the view
--          links_both_ways names them (generalizes read from the other end is specializes,
--          contradicts is `both`), filtered by score and by the type seen from that end.
--          Written as two point lookups instead of a filter on the view, so DuckDB can use
--          indexes on relationships(source_id) and (target_id) where the snapshot has them.
-- grain: one row per (memory_id, relationship row, end)
with

outgoing as (
    select
        r.source_id as memory_id,
        r.target_id as other_id,
        r.target_tier as other_tier,
        r.relationship_type,
        case when r.relationship_type = 'contradicts' then 'both' else 'out' end as direction,
        r.score,
        r.reason,
        r.origin,
        r.namespace,
        r.source_id,
        r.target_id,
        r.relationship_type as stored_type,
        r.metadata,
        r.cosine
    from relationships as r
    where r.source_id in (select unnest($ids::varchar[]))
),

incoming as (
    select
        r.target_id as memory_id,
        r.source_id as other_id,
        r.source_tier as other_tier,
        case r.relationship_type
            when 'generalizes' then 'specializes'
            when 'specializes' then 'generalizes'
            else r.relationship_type
        end as relationship_type,
        case when r.relationship_type = 'contradicts' then 'both' else 'in' end as direction,
        r.score,
        r.reason,
        r.origin,
        r.namespace,
        r.source_id,
        r.target_id,
        r.relationship_type as stored_type,
        r.metadata,
        r.cosine
    from relationships as r
    where r.target_id in (select unnest($ids::varchar[]))
),

both_ends as (
    select * from outgoing
    union all
    select * from incoming
),

final as (
    select *
    from both_ends
    where ($min_score::double is null or score >= $min_score::double)
      and ($types::varchar[] is null or list_contains($types::varchar[], relationship_type))
      and memory_id <> other_id
)

select * from final
-- equal scores (many saturate at 1) by the raw cosine: the closer text first, then by id
order by memory_id, score desc, cosine desc nulls last, other_id, relationship_type

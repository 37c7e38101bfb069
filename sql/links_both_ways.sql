-- purpose: every relationship seen from each of its two ends, named from that end's point of
--          view (generalizes read from the other end is specializes; contradicts is both ways)
-- grain: one row per (memory_id, other_id, relationship_type, origin) and end
create or replace view links_both_ways as
with

relationships as (
    select * from relationships
),

outgoing as (
    select
        r.source_id as memory_id,
        r.source_tier as memory_tier,
        r.target_id as other_id,
        r.target_tier as other_tier,
        r.relationship_type,
        case when r.relationship_type = 'contradicts' then 'both' else 'out' end as direction,
        r.score,
        r.reason,
        r.origin,
        r.namespace
    from relationships as r
),

incoming as (
    select
        r.target_id as memory_id,
        r.target_tier as memory_tier,
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
        r.namespace
    from relationships as r
),

final as (
    select * from outgoing
    union all
    select * from incoming
)

select * from final

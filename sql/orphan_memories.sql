-- purpose: memories with no relationship at either end
-- grain: one row per orphan memory
create or replace view orphan_memories as
with

memories as (
    select id, tier, namespace, content, store from memories
),

linked as (
    select source_id as id from relationships
    union
    select target_id as id from relationships
),

final as (
    select m.*
    from memories as m
    anti join linked as l on l.id = m.id
)

select * from final
order by tier, id

-- purpose: memories of a namespace with no link to a memory the principal may read (for no
--          principal, the same rows as the view orphan_memories), for the report's recommendations
-- grain: one row per orphan memory
with

memories as (
    select id, tier, namespace
    from memories
    where namespace = $namespace
      and ($principal::varchar is null or readers is null or list_contains(readers, $principal::varchar))
),

relationships as (
    select source_id, target_id from relationships where namespace = $namespace
),

linked as (
    select r.source_id as id
    from relationships as r
    inner join memories as other on other.id = r.target_id
    union
    select r.target_id as id
    from relationships as r
    inner join memories as other on other.id = r.source_id
),

final as (
    select m.id, m.tier, m.namespace, count(*) over () as total
    from memories as m
    anti join linked as l on l.id = m.id
)

select * from final
order by tier, id
limit $limit

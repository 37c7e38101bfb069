-- purpose: memories per tier, and how many of them have no link at either end
-- grain: one row per tier
with

memories as (
    select id, tier from memories
),

orphans as (
    select id from orphan_memories
),

final as (
    select
        m.tier,
        count(*) as memories,
        count(o.id) as orphans
    from memories as m
    left join orphans as o on o.id = m.id
    group by m.tier
)

select * from final
order by tier

-- purpose: each given copy group's span, read from its carried-forward chain (copies.py links
--          each copy to the next in time, metadata {"copy_group": key}): how many copies, on
--          how many days, the first and last day (UTC; null when no copy is dated). A chain row
--          names only its two ends, so a new copy adds one row instead of changing them all.
-- grain: one row per copy group in $groups that has a chain
with

chain as (
    -- equality on the whole metadata text: no JSON is parsed for the other rows
    select g.copy_group, r.source_id, r.target_id
    from relationships as r
    join (select unnest($groups::varchar[]) as copy_group) as g
        on r.metadata = '{"copy_group": "' || g.copy_group || '"}'
),

members as (
    select copy_group, source_id as id from chain
    union
    select copy_group, target_id as id from chain
),

dated as (
    select m.copy_group, cast(timezone('UTC', x.timestamp) as date) as day
    from members as m
    left join memories as x on x.id = m.id
),

final as (
    select
        copy_group,
        count(*)::bigint as copies,
        count(distinct day)::bigint as days,
        cast(min(day) as varchar) as first,
        cast(max(day) as varchar) as last
    from dated
    group by copy_group
)

select * from final
order by copy_group

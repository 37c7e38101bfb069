-- purpose: the given memories' tier, namespace, readers, time and content (the read side checks
--          existence and who may read each one in Python, on these few rows)
-- grain: one row per memory id in $ids that is in the snapshot
with

memories as (
    -- a point lookup: `in` over a bound list uses an index on memories(id) when the snapshot has one
    select id, tier, namespace, readers, timestamp, session_id, content
    from memories
    where id in (select unnest($ids::varchar[]))
),

final as (
    select * from memories
)

select * from final

-- purpose: the memories a reader sees while a watcher runs: the snapshot's, with the rows
--          the live deltas added, replaced or deleted (the latest delta touching an id wins)
-- grain: one row per memory id
-- input: snap.memories (the snapshot), delta_memories, delta_changes (transforms/publish/delta.py)
with

snapshot_memories as (
    select * from snap.memories
),

latest_change as (
    select id, max(seq) as seq
    from delta_changes
    where memory is not null
    group by id
),

kept as (
    select m.*
    from snapshot_memories as m
    anti join latest_change as c on c.id = m.id
),

live as (
    select d.* exclude (seq)
    from delta_memories as d
    inner join latest_change as c on c.id = d.id and c.seq = d.seq
),

final as (
    select * from kept
    union all by name
    select * from live
)

select * from final

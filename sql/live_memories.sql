-- purpose: the memories a reader sees while a watcher runs: the snapshot's, with the rows
--          the live deltas added, replaced or deleted (the latest delta touching an id wins)
-- grain: one row per memory id
-- input: snap.memories (the snapshot); delta_memory_ids and delta_memory_rows, tables a
--        reader derives from the deltas each time it loads more (sql/delta_memory_*.sql),
--        so a point lookup plans a join of three tables, not the deltas' grouping
with

kept as (
    select m.*
    from snap.memories as m
    anti join delta_memory_ids as c on c.id = m.id
),

final as (
    select * from kept
    union all by name
    select * from delta_memory_rows
)

select * from final

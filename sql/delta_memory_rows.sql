-- purpose: the memory rows the live deltas hold now: for each changed id, the row of the
--          latest delta that changed it (none when that delta deleted it)
-- grain: one row per memory id the deltas added or replaced and did not delete since
-- input: delta_memories, delta_changes (transforms/publish/delta.py)
with

latest_change as (
    select id, max(seq) as seq
    from delta_changes
    where memory is not null
    group by id
),

final as (
    select d.* exclude (seq)
    from delta_memories as d
    inner join latest_change as c on c.id = d.id and c.seq = d.seq
)

select * from final

-- purpose: the memories the live deltas changed (added, replaced or deleted): the snapshot's
--          row of each is hidden by the overlay (sql/live_memories.sql)
-- grain: one row per memory id
-- input: delta_changes (transforms/publish/delta.py)
select distinct id
from delta_changes
where memory is not null

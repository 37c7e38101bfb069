-- purpose: the memories whose relationship rows a live delta republished, and the latest
--          delta that did: its rows at the memory replace every earlier one
-- grain: one row per memory id
-- input: delta_changes (transforms/publish/delta.py)
select id, max(seq) as seq
from delta_changes
where links
group by id

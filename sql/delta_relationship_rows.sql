-- purpose: the relationship rows the live deltas hold now: a delta holds every row at each
--          id it marks `links`, and a row from delta i stands unless a later delta
--          republished one of its ends
-- grain: one row per published relationship that a delta holds
-- input: delta_relationships, delta_link_owners (sql/delta_link_owners.sql)
select d.* exclude (seq)
from delta_relationships as d
left join delta_link_owners as s on s.id = d.source_id
left join delta_link_owners as t on t.id = d.target_id
where coalesce(s.seq, 0) <= d.seq and coalesce(t.seq, 0) <= d.seq

-- purpose: the relationships a reader sees while a watcher runs: the snapshot's rows, where a
--          live delta republished every row at a memory, that delta's rows instead
-- grain: one row per published relationship
-- input: snap.relationships (the snapshot), delta_relationships, delta_changes
-- A delta holds every row at each id it marks `links`; a row from delta i stands unless a
-- later delta republished one of its ends, and a snapshot row stands unless any did.
with

owner as (
    select id, max(seq) as seq
    from delta_changes
    where links
    group by id
),

kept as (
    select r.*
    from snap.relationships as r
    anti join owner as o on o.id = r.source_id
    anti join owner as t on t.id = r.target_id
),

live as (
    select d.* exclude (seq)
    from delta_relationships as d
    left join owner as s on s.id = d.source_id
    left join owner as t on t.id = d.target_id
    where coalesce(s.seq, 0) <= d.seq and coalesce(t.seq, 0) <= d.seq
),

final as (
    select * from kept
    union all by name
    select * from live
)

select * from final

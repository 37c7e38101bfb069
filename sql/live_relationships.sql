-- purpose: the relationships a reader sees while a watcher runs: the snapshot's rows, where a
--          live delta republished every row at a memory, that delta's rows instead
-- grain: one row per published relationship
-- input: snap.relationships (the snapshot); delta_link_owners and delta_relationship_rows,
--        tables a reader derives from the deltas each time it loads more
--        (sql/delta_link_owners.sql, sql/delta_relationship_rows.sql)
with

kept as (
    select r.*
    from snap.relationships as r
    anti join delta_link_owners as o on o.id = r.source_id
    anti join delta_link_owners as t on t.id = r.target_id
),

final as (
    select * from kept
    union all by name
    select * from delta_relationship_rows
)

select * from final

-- purpose: the first $max_rows orphan memories, content cut to $snippet_chars,
--          the dashboard's table (the view holds them all)
-- grain: one row per orphan memory
with

orphans as (
    select * from orphan_memories
),

final as (
    select
        o.id,
        o.tier,
        o.namespace,
        o.store,
        left(o.content, $snippet_chars) as content
    from orphans as o
    order by o.tier, o.id
    limit $max_rows
)

select * from final

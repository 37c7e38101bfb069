-- purpose: the memories at either end of the graph view's links ($ids), with a content
--          snippet for the hover text
-- grain: one row per memory
with

memories as (
    select id, tier, namespace, content from memories
),

final as (
    select
        m.id,
        m.tier,
        m.namespace,
        left(m.content, $snippet_chars) as snippet
    from memories as m
    where list_contains($ids, m.id)
)

select * from final
order by id

-- purpose: audit: links whose ends lie in different namespaces, or not in the link's namespace (expect none)
-- grain: one row per offending link
with

relationships as (
    select source_id, target_id, namespace from relationships
),

memories as (
    select id, namespace from memories
),

final as (
    select
        r.source_id,
        r.target_id,
        r.namespace,
        a.namespace as source_namespace,
        b.namespace as target_namespace
    from relationships as r
    left join memories as a on a.id = r.source_id
    left join memories as b on b.id = r.target_id
    where a.namespace is distinct from b.namespace
        or r.namespace is distinct from a.namespace
)

select * from final

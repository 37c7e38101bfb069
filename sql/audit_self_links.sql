-- purpose: audit: links from a memory to itself (expect none)
-- grain: one row per offending link
with

relationships as (
    select * from relationships
),

final as (
    select * from relationships
    where source_id = target_id
)

select * from final

-- purpose: audit: memories with more than $max_links capped links (discovered, not explicit, not a
--          "carried forward" link between copies, which is outside the cap) (expect none)
-- grain: one row per offending memory
with

capped as (
    select source_id, target_id from relationships
    where origin <> 'manual' and coalesce(cross_reference, 0.0) = 0
        and not contains(coalesce(metadata, ''), '"copy_group"')
),

ends as (
    select source_id as memory_id from capped
    union all
    select target_id as memory_id from capped
),

final as (
    select memory_id, count(*) as links
    from ends
    group by memory_id
    having count(*) > $max_links
)

select * from final

-- purpose: the cap: each memory keeps at most $max_links discovered links, the strongest
-- grain: one row per kept link (same columns as the input links)
-- input: links (RELATIONSHIP_SCHEMA)
-- A discovered link is kept when it ranks within the top $max_links at BOTH its ends
-- (ranked by score, ties by the other end's id, then type), so no memory exceeds the cap
-- and the result does not depend on row order. Explicit references (cross_reference > 0)
-- and manual links are always kept and do not count against the cap.
with

links as (
    select * from links
),

capped as (
    select * from links
    where origin <> 'manual' and coalesce(cross_reference, 0.0) = 0
),

ends as (
    select source_id as memory_id, target_id as other_id, source_id, target_id, relationship_type, score
    from capped
    union all
    select target_id as memory_id, source_id as other_id, source_id, target_id, relationship_type, score
    from capped
),

ranked as (
    select
        source_id,
        target_id,
        relationship_type,
        row_number() over (
            partition by memory_id order by score desc, other_id, relationship_type
        ) as memory_rank
    from ends
),

within_cap as (
    select source_id, target_id, relationship_type
    from ranked
    group by source_id, target_id, relationship_type
    having max(memory_rank) <= $max_links
),

final as (
    select c.*
    from capped as c
    semi join within_cap as w
        on w.source_id = c.source_id
        and w.target_id = c.target_id
        and w.relationship_type = c.relationship_type
    union all
    select * from links
    where origin = 'manual' or coalesce(cross_reference, 0.0) > 0
)

select * from final

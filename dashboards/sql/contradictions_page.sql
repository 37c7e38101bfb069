-- purpose: the first $max_rows contradictions to review, content cut to $snippet_chars,
--          the dashboard's table (the view holds them all)
-- grain: one row per contradicts relationship
with

contradictions as (
    select * from contradictions_to_review
),

final as (
    select
        c.source_id,
        c.source_tier,
        left(c.source_content, $snippet_chars) as source_content,
        c.target_id,
        c.target_tier,
        left(c.target_content, $snippet_chars) as target_content,
        c.score,
        c.reason,
        c.origin,
        c.namespace
    from contradictions as c
    order by c.score desc, c.source_id, c.target_id
    limit $max_rows
)

select * from final

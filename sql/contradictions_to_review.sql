-- purpose: contradictions a person should review, strongest first
-- grain: one row per contradicts relationship
create or replace view contradictions_to_review as
with

relationships as (
    select * from relationships
),

memories as (
    select id, content from memories
),

final as (
    select
        r.source_id,
        r.source_tier,
        a.content as source_content,
        r.target_id,
        r.target_tier,
        b.content as target_content,
        r.score,
        r.reason,
        r.origin,
        r.namespace
    from relationships as r
    left join memories as a on a.id = r.source_id
    left join memories as b on b.id = r.target_id
    where r.relationship_type = 'contradicts'
)

select * from final
order by score desc, source_id, target_id

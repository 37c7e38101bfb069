-- purpose: links per relationship type and origin, with their mean score
-- grain: one row per (relationship_type, origin)
with

relationships as (
    select relationship_type, origin, score from relationships
),

final as (
    select
        r.relationship_type,
        r.origin,
        count(*) as links,
        avg(r.score) as mean_score
    from relationships as r
    group by r.relationship_type, r.origin
)

select * from final
order by relationship_type, origin

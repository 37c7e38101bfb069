-- purpose: the tier x tier link matrix, split by relationship type
-- grain: one row per (source_tier, target_tier, relationship_type)
with

relationships as (
    select source_tier, target_tier, relationship_type, score from relationships
),

final as (
    select
        r.source_tier,
        r.target_tier,
        r.relationship_type,
        count(*) as links,
        avg(r.score) as mean_score
    from relationships as r
    group by r.source_tier, r.target_tier, r.relationship_type
)

select * from final
order by source_tier, target_tier, relationship_type

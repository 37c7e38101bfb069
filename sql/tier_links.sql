-- purpose: how the tiers link: link count and average score per source tier, target tier and type
-- grain: one row per (source_tier, target_tier, relationship_type) that has links
-- input: relationships (RELATIONSHIP_SCHEMA)
with

relationships as (
    select source_tier, target_tier, relationship_type, score from relationships
),

final as (
    select
        source_tier,
        target_tier,
        relationship_type,
        count(*) as links,
        avg(score) as avg_score
    from relationships
    group by source_tier, target_tier, relationship_type
)

select * from final
order by source_tier, target_tier, relationship_type

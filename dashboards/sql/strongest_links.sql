-- purpose: the strongest links, the graph view's sample ($max_edges, ties broken by ids
--          so the sample is the same on every build)
-- grain: one row per relationship
with

relationships as (
    select source_id, source_tier, target_id, target_tier, relationship_type, score, reason, origin
    from relationships
),

final as (
    select
        r.source_id,
        r.source_tier,
        r.target_id,
        r.target_tier,
        r.relationship_type,
        r.score,
        r.reason,
        r.origin
    from relationships as r
    order by r.score desc nulls last, r.source_id, r.target_id, r.relationship_type
    limit $max_edges
)

select * from final

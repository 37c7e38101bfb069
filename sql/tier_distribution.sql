-- purpose: per tier: memories, linked memories, orphans, links touching the tier, their average score
-- grain: one row per tier (all three, even when empty)
-- inputs: memories(id, tier), relationships (RELATIONSHIP_SCHEMA)
-- A link between two tiers counts once in each; a link inside one tier counts once.
with

tiers as (
    select * from (values ('episodic', 1), ('semantic', 2), ('procedural', 3)) as t(tier, tier_order)
),

memories as (
    select id, tier from memories
),

relationships as (
    select source_id, source_tier, target_id, target_tier, score from relationships
),

linked_ids as (
    select source_id as id from relationships
    union
    select target_id as id from relationships
),

memory_counts as (
    select
        m.tier,
        count(*) as memories,
        count(l.id) as linked_memories
    from memories as m
    left join linked_ids as l on l.id = m.id
    group by m.tier
),

tier_link_rows as (
    select source_tier as tier, score from relationships
    union all
    select target_tier as tier, score from relationships
    where target_tier <> source_tier
),

link_counts as (
    select tier, count(*) as links, avg(score) as avg_score
    from tier_link_rows
    group by tier
),

final as (
    select
        t.tier,
        coalesce(m.memories, 0) as memories,
        coalesce(m.linked_memories, 0) as linked_memories,
        coalesce(m.memories, 0) - coalesce(m.linked_memories, 0) as orphans,
        coalesce(k.links, 0) as links,
        k.avg_score
    from tiers as t
    left join memory_counts as m on m.tier = t.tier
    left join link_counts as k on k.tier = t.tier
    order by t.tier_order
)

select * from final

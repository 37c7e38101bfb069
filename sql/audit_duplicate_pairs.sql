-- purpose: audit: a pair of memories linked more than once, either way round (expect none)
-- grain: one row per offending unordered pair
with

relationships as (
    select source_id, target_id from relationships
),

pairs as (
    select least(source_id, target_id) as first_id, greatest(source_id, target_id) as second_id
    from relationships
),

final as (
    select first_id, second_id, count(*) as links
    from pairs
    group by first_id, second_id
    having count(*) > 1
)

select * from final

-- purpose: score histogram per relationship type, binned in SQL so the page never
--          carries one point per link ($bins equal bins over [0, 1]; 1.0 falls in the last)
-- grain: one row per (relationship_type, bin) with at least one link
with

relationships as (
    select relationship_type, score from relationships
),

binned as (
    select
        r.relationship_type,
        least(greatest(cast(floor(r.score * $bins) as integer), 0), $bins - 1) as bin
    from relationships as r
    where r.score is not null and not isnan(r.score)
),

final as (
    select
        b.relationship_type,
        b.bin,
        count(*) as links
    from binned as b
    group by b.relationship_type, b.bin
)

select * from final
order by relationship_type, bin

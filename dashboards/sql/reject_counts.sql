-- purpose: rejected records per store and reason, the $max_rows commonest
-- grain: one row per (store, reason)
with

rejects as (
    select store, reason from rejects
),

final as (
    select
        r.store,
        r.reason,
        count(*) as rejects
    from rejects as r
    group by r.store, r.reason
)

select * from final
order by rejects desc, store, reason
limit $max_rows

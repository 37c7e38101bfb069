-- purpose: the report's unlinked neighbours of a memory: memories of its namespace the principal may
--          read, with no link to a memory the principal may read, in the same session, the same
--          daily log, or within $hours hours of it (the seed itself excluded)
-- grain: one row per neighbouring orphan memory
with

memories as (
    select
        id, tier, namespace, session_id, timestamp, content,
        -- a daily log is a neighbourhood; a jsonl file or MEMORY.md holds a whole store
        case when tier = 'episodic' and split_part(location, ':', 1) like '%.md' then split_part(location, ':', 1) end
            as source_file
    from memories
    where namespace = $namespace
      and ($principal::varchar is null or readers is null or list_contains(readers, $principal::varchar))
),

relationships as (
    select source_id, target_id from relationships where namespace = $namespace
),

linked as (
    select r.source_id as id
    from relationships as r
    inner join memories as other on other.id = r.target_id
    union
    select r.target_id as id
    from relationships as r
    inner join memories as other on other.id = r.source_id
),

seed as (
    select * from memories where id = $memory_id
),

neighbours as (
    select
        m.id, m.tier, m.namespace, m.content,
        case
            when m.session_id = s.session_id then 'same session'
            when m.source_file = s.source_file then 'same file'
            else 'same day'
        end as why,
        abs(coalesce(epoch(m.timestamp) - epoch(s.timestamp), 0)) as seconds_apart
    from memories as m
    cross join seed as s
    where m.id <> s.id
      and (
          coalesce(m.session_id = s.session_id, false)
          or coalesce(m.source_file = s.source_file, false)
          or coalesce(abs(epoch(m.timestamp) - epoch(s.timestamp)) <= 3600.0 * $hours, false)
      )
),

final as (
    select n.*, count(*) over () as total
    from neighbours as n
    anti join linked as l on l.id = n.id
)

select * from final
order by why, seconds_apart, id
limit $limit

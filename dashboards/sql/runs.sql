-- purpose: every recorded run, whatever columns the flow gives the table (the page picks
--          the latest and the fields it knows)
-- grain: one row per run
select * from runs

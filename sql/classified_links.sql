-- purpose: the qualifying pairs (sql/qualifying_pairs.sql) as links, each with its relationship
--          type, direction and reason (DESIGN.md, Relationship types)
-- grain: one row per linked pair, stored as a directed edge source_id -> target_id
--        (contradicts: once, source_id < target_id)
-- inputs: qualifying_pairs (pair_scores' columns), link_memories (memories with transforms/link/features.py columns)
with

qualifying_pairs as (
    select * from qualifying_pairs
),

memories as not materialized (
    select * from link_memories
),

-- What only a possible conflict reads (the negation, values, agents, subject and copy evidence),
-- joined to the pairs that may conflict alone: gathering these lists for every pair was a quarter of
-- classifying 4.07M stored links at 100k (a 500k-pair slice 3.2 -> 2.35 s, the same rows)
heavy as not materialized (
    select idx, negation, negated_terms, stated_terms, negative_stated, negation_scope, vals, subject_terms,
        exclusive, copy_text, value_labels
    from link_memories
),

base as (
    select
        s.*,
        -- the most specific name each side has that the other shares (name_terms: a reason's
        -- candidates, most specific first, features._reason_order), and the shared words in that order
        list_filter(a.name_terms, lambda t: list_contains(b.terms, t))[1] as a_shared_name,
        list_filter(b.name_terms, lambda t: list_contains(a.terms, t))[1] as b_shared_name,
        list_filter(a.word_terms, lambda t: list_contains(b.terms, t))[1:3] as shared_words,
        list_has_any(a.polarity, b.polarity_flip) as antonym_conflict,
        -- whether any contradiction rule can hold (rules.is_conflict): a close enough pair with values
        -- on both sides, agents or objects on both, opposite words, or a negation. The costly
        -- evidence (heavy) is read only where it can (most pairs have none of these)
        coalesce(s.semantic >= $contradiction_min_semantic and (
            len(a.vals) > 0 and len(b.vals) > 0
            or len(a.exclusive) > 0 and len(b.exclusive) > 0
            or antonym_conflict
            or len(a.negated_terms) > 0
            or len(b.negated_terms) > 0
        ), false) as may_conflict,
        a.tier as a_tier, a.timestamp as a_ts, a.session_id as a_session, a.content as a_content,
        a.terms as a_terms, a.polarity as a_polarity, a.polarity_flip as a_polarity_flip,
        a.causal_cue as a_cue, a.cause_terms as a_cause,
        b.tier as b_tier, b.timestamp as b_ts, b.session_id as b_session, b.content as b_content,
        b.terms as b_terms, b.polarity as b_polarity, b.polarity_flip as b_polarity_flip,
        b.causal_cue as b_cue, b.cause_terms as b_cause,
        a.ended as a_ended, b.ended as b_ended
    from qualifying_pairs as s
    join memories as a on a.idx = s.a_idx
    join memories as b on b.idx = s.b_idx
),

kept as (
    select
        k.*,
        ha.negation as a_negation, ha.negated_terms as a_negated, ha.stated_terms as a_stated, ha.negative_stated as a_negative,
        ha.negation_scope as a_scope, ha.vals as a_vals, ha.subject_terms as a_subject, ha.exclusive as a_exclusive,
        ha.copy_text as a_copy, ha.value_labels as a_labels,
        hb.negation as b_negation, hb.negated_terms as b_negated, hb.stated_terms as b_stated, hb.negative_stated as b_negative,
        hb.negation_scope as b_scope, hb.vals as b_vals, hb.subject_terms as b_subject, hb.exclusive as b_exclusive,
        hb.copy_text as b_copy, hb.value_labels as b_labels
    from base as k
    left join heavy as ha on k.may_conflict and ha.idx = k.a_idx
    left join heavy as hb on k.may_conflict and hb.idx = k.b_idx
),

evidence as (
    select
        *,
        case
            when a_ts is not null and b_ts is not null and a_ts <> b_ts then a_ts < b_ts
        end as a_strictly_earlier,
        case
            when a_ts is not null and b_ts is not null and a_ts <> b_ts then a_ts < b_ts
            when a_ts is not null and b_ts is null then true
            when a_ts is null and b_ts is not null then false
            else a_id < b_id
        end as a_first,
        coalesce(a_session = b_session, false) as same_session,
        case when may_conflict then coalesce(
            len(list_intersect(a_subject, b_subject))
            / nullif(len(a_subject) + len(b_subject) - len(list_intersect(a_subject, b_subject)), 0),
            0.0
        ) end as subject_overlap,
        -- subjects both give a value for whose value sets are disjoint ("python=3.11" vs "python=3.12"):
        -- a subject with a value on both sides that agrees is no conflict, whatever else either side lists
        -- ("0.962 and 0.991" vs "0.962"); values agree when equal or one refines the other ("16" and "16.4")
        case when may_conflict then list_filter(
            list_intersect(
                list_transform(a_vals, lambda v: split_part(v, '=', 1)),
                list_transform(b_vals, lambda w: split_part(w, '=', 1))
            ),
            lambda k: not list_contains(list_transform(
                list_filter(a_vals, lambda v: len(list_filter(b_vals, lambda w:
                    split_part(w, '=', 1) = split_part(v, '=', 1) and (
                        w = v
                        or starts_with(split_part(w, '=', 2), split_part(v, '=', 2) || '.')
                        or starts_with(split_part(v, '=', 2), split_part(w, '=', 2) || '.')
                    ))) > 0),
                lambda v: split_part(v, '=', 1)
            ), k)
        ) end as conflict_subjects,
        -- the subject apart from the opposites themselves (subject_terms folds "sitting" and "standing"
        -- onto one group, which would count the conflict as shared subject)
        case when may_conflict then list_transform(list_intersect(a_polarity, b_polarity_flip), lambda m: regexp_replace(m, '[+-]$', '')) end as opposite_groups,
        case when may_conflict then coalesce(
            len(list_filter(list_intersect(a_subject, b_subject), lambda w: not list_contains(opposite_groups, w)))
            / nullif(len(list_filter(list_distinct(list_concat(a_subject, b_subject)), lambda w: not list_contains(opposite_groups, w))), 0),
            0.0
        ) end as subject_overlap_apart_from_opposites,
        -- a different agent or object in the same event ("a man" / "a woman", "a dog" / "a cat"):
        -- a group both name whose members do not meet (a side naming both meets either)
        case when may_conflict then list_filter(
            list_intersect(
                list_transform(a_exclusive, lambda v: split_part(v, '=', 1)),
                list_transform(b_exclusive, lambda w: split_part(w, '=', 1))
            ),
            lambda g: not list_has_any(
                list_filter(a_exclusive, lambda v: split_part(v, '=', 1) = g),
                list_filter(b_exclusive, lambda w: split_part(w, '=', 1) = g)
            )
        ) end as exclusive_groups,
        -- a phrase one side negates ("no longer prefers tabs": "prefer tab") that the other states, every
        -- word of it, outside any negation; two sides whose negations share a word negate the same thing;
        -- a negation the other side answers with a negative state word outside the phrase is a double
        -- negative ("nobody is in the room" / "the room is empty"), not a conflict; and the other side must
        -- state every word the negation covers: denying a more specific claim ("no man riding an
        -- electric bicycle") does not deny the less specific one ("a man riding a bicycle"); and the
        -- negating side's own subject (its words outside the negation) is, for the most part, the
        -- other's: "the squirrel is not running in circles" does not deny "an animal is running in circles"
        case when may_conflict then not list_has_any(a_scope, b_scope) end as negations_apart,
        -- words of each side's negation scope, and of what it states, that the other side does not state
        case when may_conflict then len(list_filter(a_scope, lambda w: not list_contains(b_stated, w) and not list_contains($negation_ignored, w))) end as a_scope_unstated,
        case when may_conflict then len(list_filter(b_scope, lambda w: not list_contains(a_stated, w) and not list_contains($negation_ignored, w))) end as b_scope_unstated,
        case when may_conflict then len(list_filter(a_stated, lambda w: not list_contains(b_stated, w))) end as a_stated_unstated,
        case when may_conflict then len(list_filter(b_stated, lambda w: not list_contains(a_stated, w))) end as b_stated_unstated,
        case when may_conflict then negations_apart and len(list_filter(a_negated, lambda p: list_has_all(b_stated, string_split(p, ' '))
            and len(list_filter(b_negative, lambda w: not list_contains(string_split(p, ' '), w))) = 0)) > 0
            and a_scope_unstated = 0
            and (len(a_stated) = 0 or a_stated_unstated < len(a_stated) * (1 - $contradiction_min_overlap)) end
            as a_negates_b,
        case when may_conflict then negations_apart and len(list_filter(b_negated, lambda p: list_has_all(a_stated, string_split(p, ' '))
            and len(list_filter(a_negative, lambda w: not list_contains(string_split(p, ' '), w))) = 0)) > 0
            and b_scope_unstated = 0
            and (len(b_stated) = 0 or b_stated_unstated < len(b_stated) * (1 - $contradiction_min_overlap)) end
            as b_negates_a,
        -- one word of the denied claim said in other words ("no chef preparing a meal" / "a chef is
        -- preparing some food"): a word of a negated phrase and every other word the negation covers
        -- stated by the other side (a claim of one word, "can't beat it", is not reworded), which
        -- says something in its place (a word the negating side lacks; not the person words a named
        -- person states, features._content_words), the whole subject the other's (one word changed, no
        -- more), and the two texts close enough in meaning that the swap is a paraphrase, not another
        -- thing ("no man playing a guitar" / "a man playing a piano" are both true)
        case when may_conflict then negations_apart and cosine >= $negation_paraphrase_min_cosine and len(b_negative) = 0
            and len(list_filter(a_negated, lambda p: list_has_any(b_stated, string_split(p, ' ')))) > 0
            and a_scope_unstated = 1 and a_stated_unstated = 0
            and len(list_filter(b_stated, lambda w: w <> 'person' and not contains(w, '=') and not list_contains(a_scope, w) and not list_contains(a_stated, w))) > 0 end
            as a_negates_b_reworded,
        case when may_conflict then negations_apart and cosine >= $negation_paraphrase_min_cosine and len(a_negative) = 0
            and len(list_filter(b_negated, lambda p: list_has_any(a_stated, string_split(p, ' ')))) > 0
            and b_scope_unstated = 1 and b_stated_unstated = 0
            and len(list_filter(a_stated, lambda w: w <> 'person' and not contains(w, '=') and not list_contains(b_scope, w) and not list_contains(b_stated, w))) > 0 end
            as b_negates_a_reworded,
        case
            -- an episode that cites the fact gives evidence for it (supports); without two dates every
            -- other episode may be the origin; the strongest one per fact stays
            -- derives_from (links.with_undated_origins), the others become supports
            when a_tier = 'semantic' and b_tier = 'episodic' then
                a_refers_b or (not b_refers_a and coalesce(b_ts <= a_ts, true))
            when a_tier = 'episodic' and b_tier = 'semantic' then
                b_refers_a or (not a_refers_b and coalesce(a_ts <= b_ts, true))
        end as episode_is_origin
    from kept
),

not_contradictions as (
    -- conflicts that are not contradictions (DESIGN.md, contradicts): copies (the same normalised
    -- text, transforms/link/copies.py) never contradict; a conflict between two episodes at
    -- different times, or between a state said to have ended ("ran on 3.11 until PR #509") and
    -- another, is a change of state (the reason says what changed, earlier -> later)
    select
        * replace (a_negates_b or a_negates_b_reworded as a_negates_b, b_negates_a or b_negates_a_reworded as b_negates_a),
        case when may_conflict then coalesce(a_copy = b_copy, false) end as same_text,
        a_tier = 'episodic' and b_tier = 'episodic' and coalesce(a_ts <> b_ts, false) as dated_apart,
        coalesce(a_ended, false) <> coalesce(b_ended, false) as ended_apart,
        case
            when a_tier = 'episodic' and b_tier = 'episodic' and a_ts <> b_ts then a_ts < b_ts
            else coalesce(a_ended, false)
        end as a_before
    from evidence
),

rules as (
    select
        *,
        len(conflict_subjects) > 0 as value_conflict,
        -- text alone cannot say that two descriptions are of one event ("a boy" / "a girl is standing
        -- next to the fountain" may both be true): only memories dated to the same moment are
        len(exclusive_groups) > 0 and coalesce(a_ts = b_ts, false) as exclusive_conflict,
        list_filter(a_vals, lambda v: list_contains(conflict_subjects, split_part(v, '=', 1))) as a_own_values,
        list_filter(b_vals, lambda v: list_contains(conflict_subjects, split_part(v, '=', 1))) as b_own_values,
        -- may_conflict first: the evidence it guards is null where it is false
        may_conflict and semantic >= $contradiction_min_semantic
            and (
                subject_overlap >= $contradiction_min_overlap and (value_conflict or exclusive_conflict)
                or antonym_conflict and subject_overlap_apart_from_opposites >= $contradiction_min_overlap
                or subject_overlap >= $contradiction_min_overlap * 0.5 and (a_negates_b or b_negates_a)
            )
            and not same_text as is_conflict,
        case when b_cue is not null then coalesce(a_strictly_earlier and list_has_any(b_cause, a_terms), false) else false end as a_causes_b,
        case when a_cue is not null then coalesce(not a_strictly_earlier and list_has_any(a_cause, b_terms), false) else false end as b_causes_a,
        a_tier = 'episodic' and b_tier = 'episodic' and (
            same_session
            or coalesce(abs(epoch(a_ts) - epoch(b_ts)) <= 3600.0 * $sequence_max_hours, false)
        ) as is_sequence
    from not_contradictions
),

conflicts as (
    select
        *,
        is_conflict and not (dated_apart or ended_apart) as is_contradiction,
        is_conflict and (dated_apart or ended_apart) as is_state_change
    from rules
),

typed as (
    -- the rules of DESIGN.md in order: the first that holds names the type
    select
        *,
        case
            when is_contradiction then 'contradicts'
            when is_state_change and a_tier = 'episodic' and b_tier = 'episodic' then 'temporal_sequence'
            when a_causes_b or b_causes_a then 'causal'
            when is_sequence then 'temporal_sequence'
            when episode_is_origin then 'derives_from'
            when episode_is_origin is not null then 'supports'
            when (a_tier = 'procedural') <> (b_tier = 'procedural') then 'generalizes'
            else 'references'
        end as relationship_type
    from conflicts
),

directed as (
    select
        *,
        case relationship_type
            when 'contradicts' then a_id < b_id
            when 'causal' then a_causes_b
            when 'temporal_sequence' then a_first
            when 'derives_from' then a_tier = 'semantic'
            when 'supports' then a_tier = 'episodic'
            when 'generalizes' then a_tier = 'procedural'
            else a_refers_b or not b_refers_a
        end as a_is_source,
        -- the most specific shared name: the longest, then the first alphabetically; a name is
        -- evidence only with a letter and three characters ("00", "40.43" from times and figures are not);
        -- otherwise (kept.shared_words) the longest shared terms with a letter (up to three), longest first
        case
            when a_shared_name is null then b_shared_name
            when b_shared_name is null then a_shared_name
            when length(a_shared_name) <> length(b_shared_name) then
                case when length(a_shared_name) > length(b_shared_name) then a_shared_name else b_shared_name end
            else least(a_shared_name, b_shared_name)
        end as best_term,
        case when a_is_source then a_content else b_content end as source_content,
        -- where the name first stands in the source's text, found by position where both are ASCII
        -- (bytes = characters; 0: not there), null where a pattern must find it (reasoned)
        case when strlen(source_content) = length(source_content) and strlen(best_term) = length(best_term)
            then instr(lower(source_content), lower(best_term)) end as ascii_name_at
    from typed
),

reasoned as (
    select
        *,
        case
            when relationship_type = 'contradicts' then
                'Contradiction: ' || case
                    when value_conflict then
                        array_to_string(list_sort(list_distinct(list_transform(a_own_values, lambda v: split_part(v, '=', 2)))), ', ')
                        || ' vs '
                        || array_to_string(list_sort(list_distinct(list_transform(b_own_values, lambda v: split_part(v, '=', 2)))), ', ')
                    when antonym_conflict and not (a_negates_b or b_negates_a) then
                        'opposite ' || regexp_replace(list_intersect(a_polarity, b_polarity_flip)[1], '[+-]$', '')
                    when exclusive_conflict then
                        array_to_string(list_sort(list_transform(
                            list_filter(a_exclusive, lambda v: split_part(v, '=', 1) = exclusive_groups[1]),
                            lambda v: split_part(v, '=', 2))), ', ')
                        || ' vs '
                        || array_to_string(list_sort(list_transform(
                            list_filter(b_exclusive, lambda w: split_part(w, '=', 1) = exclusive_groups[1]),
                            lambda w: split_part(w, '=', 2))), ', ')
                    when a_negates_b or b_negates_a then 'negation (' || case when a_negates_b then a_negation else b_negation end || ')'
                end
            when relationship_type = 'causal' then
                'Causal cue: ' || case when a_causes_b then b_cue else a_cue end
            when is_state_change then
                -- what changed, earlier -> later ("Changed: Kanban ideas 1 -> 16")
                'Changed: ' || case
                    when value_conflict then
                        coalesce(split_part(list_filter(
                            list_concat(a_labels, b_labels), lambda l: split_part(l, '=', 1) = conflict_subjects[1]
                        )[1], '=', 2) || ' ', '')
                        || array_to_string(list_sort(list_distinct(list_transform(
                            case when a_before then a_own_values else b_own_values end, lambda v: split_part(v, '=', 2)))), ', ')
                        || ' -> '
                        || array_to_string(list_sort(list_distinct(list_transform(
                            case when a_before then b_own_values else a_own_values end, lambda v: split_part(v, '=', 2)))), ', ')
                    when antonym_conflict and not (a_negates_b or b_negates_a) then
                        regexp_replace(list_intersect(a_polarity, b_polarity_flip)[1], '[+-]$', '') || ' turned the other way'
                    when a_negates_b or b_negates_a then 'now negated (' || case when a_negates_b then a_negation else b_negation end || ')'
                end
            when relationship_type = 'temporal_sequence' then
                case when same_session then 'Sequential session' else 'Close in time' || case
                    when a_ts is not null and b_ts is not null and a_ts::date = b_ts::date then ', same day'
                    when a_ts is not null and b_ts is not null then ', ' || abs(date_diff('day', a_ts, b_ts))::varchar || ' days apart'
                    else ''
                end
                || case when best_term is not null then ' (' || best_term || ')' else '' end end
            when cross_reference > 0 then 'Explicit reference'
            when best_term is not null then
                'Entity match: ' || coalesce(nullif(
                    -- the name as the source writes it, with the rest of its word ("deploy" ->
                    -- "deploy-prod"); by position where directed found it (a pattern made per row
                    -- cost ~40% of classifying)
                    case
                        when ascii_name_at is null then regexp_extract(source_content, '(?i)' || regexp_escape(best_term) || '[\w-]*')
                        when ascii_name_at > 0 then
                            substr(source_content, ascii_name_at, length(best_term))
                            || regexp_extract(substr(source_content, ascii_name_at + length(best_term)), '^[\w-]*')
                    end, ''),
                    best_term
                )
            when $w_temporal * coalesce(temporal, 0.0) > $w_semantic * semantic then 'Close in time'
            when len(shared_words) > 0 then 'Shared terms: ' || array_to_string(shared_words, ', ')
            else 'Content similarity'
        end as reason
    from directed
),

final as (
    select
        case when a_is_source then a_id else b_id end as source_id,
        case when a_is_source then a_tier else b_tier end as source_tier,
        case when a_is_source then b_id else a_id end as target_id,
        case when a_is_source then b_tier else a_tier end as target_tier,
        relationship_type,
        score,
        semantic,
        co_occurrence,
        temporal,
        cross_reference,
        cosine,
        reason,
        'discovered' as origin,
        namespace,
        null::varchar as run_id,
        null::varchar as metadata
    from reasoned
)

select * from final

"""Writes bench/labelled/chats.jsonl and statements.jsonl from the hand-written material below.

    .venv/bin/python bench/labelled/make_labelled.py

Everything here was written by hand for bench/quality.py (see README.md in this folder):
multi-session chats of one user each (a namespace), facts each reworded from one specific
turn, and statement pairs labelled contradicts / consistent / unrelated. The JSONL files are
the data; this script only lays them out (ids, timestamps, split) so they stay reproducible.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent

# chat -> (split, [session turns...], [(fact, session index, turn index, dated?)])
CHATS = {
    "ops": ("tune", [
        [
            "Can you look at the deploy for the payments service?",
            "Sure. The last run of the pipeline stopped at the migration step.",
            "Which migration?",
            "0042, it adds an index on invoices.created_at and it timed out after 10 minutes.",
            "Ugh. Can we run it concurrently?",
            "Yes, CREATE INDEX CONCURRENTLY avoids the lock; I'll change the migration.",
            "ok do it",
            "Done, the deploy went through and payments is on 3.4.1 now.",
        ],
        [
            "Latency on the search API went through the roof this morning.",
            "p99 jumped from 180 ms to 2.3 s around 09:10.",
            "What changed?",
            "Ravi raised the connection pool from 20 to 60 yesterday evening.",
            "That would exhaust Postgres connections, right?",
            "Yes, max_connections is 100 and three replicas now ask for 180.",
            "Roll it back.",
            "Pool is back at 20 and p99 is 190 ms again.",
        ],
        [
            "When did we last test a restore?",
            "The last restore drill was in March.",
            "That's too long ago.",
            "I can run one on the staging replica tonight.",
            "Yes please, and time it.",
            "Restore of the 40 GB dump took 23 minutes, all checks passed.",
        ],
    ], [
        ("Migration 0042 was rewritten to build its index concurrently so it no longer times out.", 0, 5, True),
        ("The payments service runs version 3.4.1.", 0, 7, False),
        ("Search got slow after someone tripled the size of the database pool.", 1, 3, True),
        ("The database server accepts a hundred clients at most.", 1, 5, False),
        ("The pool size was restored to 20 after the search incident.", 1, 7, True),
        ("Recovering the full backup takes under half an hour.", 2, 5, False),
        ("Nobody had rehearsed recovering data since spring.", 2, 1, True),
    ]),
    "dev": ("tune", [
        [
            "Quick one: tabs or spaces for the new repo?",
            "The team style guide says 4 spaces for Python.",
            "Fine, but I still want tabs in my own scratch scripts.",
            "Noted, I'll leave your scratch folder alone when formatting.",
            "Also switch my editor theme to the dark one.",
            "Switched VS Code to the Dark Modern theme.",
        ],
        [
            "The settings page should be in TypeScript, not plain JS.",
            "Agreed, I'll port settings.js to settings.tsx.",
            "Use strict mode please.",
            "strict is on in tsconfig and the build passes.",
            "Tests?",
            "Vitest covers the form validation, 14 tests green.",
        ],
        [
            "CI takes forever again.",
            "The test job spends 6 minutes installing dependencies every run.",
            "Can we cache them?",
            "I added a cache keyed on the lockfile hash; installs now take 40 seconds.",
            "Nice. What about the flaky e2e test?",
            "It waits on a fixed sleep; I replaced it with a wait for the network to go idle.",
        ],
    ], [
        ("Python code in the team repository is indented with four spaces.", 0, 1, False),
        ("Personal throwaway code must keep its hard tab characters.", 0, 2, True),
        ("The user's editor uses the Dark Modern colour theme.", 0, 5, False),
        ("The preferences screen is now typed, with the strictest compiler checks on.", 1, 3, True),
        ("Form validation on the settings page has 14 Vitest tests.", 1, 5, False),
        ("Pipeline package downloads are reused between builds, keyed by the lockfile.", 2, 3, True),
        ("An unreliable browser test used to pause for a hard-coded interval.", 2, 5, False),
    ]),
    "travel": ("tune", [
        [
            "Book me a train to Berlin for the conference next Thursday.",
            "Morning or evening?",
            "Morning, I need to be there by 11.",
            "Booked the 06:48 ICE, arriving 10:31, seat 45 in coach 7.",
            "Great. And a hotel close to the venue, two nights.",
            "Reserved two nights at the Hotel Adlon Kempinski, 5 minutes walk.",
            "Too pricey, find something cheaper.",
            "Changed to the Motel One at Alexanderplatz, 89 EUR a night.",
        ],
        [
            "I want to plan a week in Portugal in September.",
            "Lisbon and Porto, or the Algarve coast?",
            "Cities. I get bored on beaches.",
            "Then four nights in Lisbon and three in Porto, with the train between them.",
            "I don't fly short hops anymore, keep it on rails.",
            "Understood: the Lisbon to Porto Alfa Pendular takes under three hours.",
        ],
        [
            "My passport expires in January.",
            "Several countries want six months of validity on entry.",
            "So I should renew before the Japan trip in November?",
            "Yes, apply by the end of August to be safe.",
        ],
    ], [
        ("The user prefers early departures when travelling to events.", 0, 2, True),
        ("For the Berlin trip the user stays at the Motel One Alexanderplatz.", 0, 7, False),
        ("Luxury accommodation is more than the user wants to spend.", 0, 6, True),
        ("The user finds seaside holidays dull and would rather see towns.", 1, 2, False),
        ("The user avoids planes for short distances and goes by rail.", 1, 4, True),
        ("The user's travel document runs out at the start of next year.", 2, 0, False),
    ]),
    "health": ("tune", [
        [
            "I started running again, three times a week.",
            "How far do you go?",
            "About 5 km, but my left knee hurts after.",
            "That can be cadence; try shorter steps and soft ground for two weeks.",
            "I'll try the park trail then.",
        ],
        [
            "Remind me what the doctor said about coffee.",
            "She asked you to stop after 2 pm because of your sleep.",
            "Right. And the blood test?",
            "Vitamin D was low, 18 ng/ml; she prescribed 2000 IU daily.",
            "Set a reminder for the pill at breakfast.",
            "Daily reminder set for 07:30.",
        ],
        [
            "I'm allergic to penicillin, did I tell you?",
            "Not yet, I'll note it.",
            "Also no shellfish, it makes me sick.",
            "Noted both: penicillin allergy and a shellfish intolerance.",
        ],
    ], [
        ("The user jogs roughly five kilometres each outing.", 0, 2, False),
        ("A physician told the user to avoid caffeine in the afternoon.", 1, 1, True),
        ("The user's vitamin D level was 18 and a daily supplement was prescribed.", 1, 3, False),
        ("The supplement reminder fires every morning at half past seven.", 1, 5, True),
        ("Antibiotics of the penicillin family must never be given to the user.", 2, 0, False),
        ("Seafood such as prawns and mussels upsets the user's stomach.", 2, 2, True),
    ]),
    "home": ("measure", [
        [
            "The kitchen tap has been dripping for a week.",
            "Is it the hot or the cold side?",
            "Hot side, it gets worse at night.",
            "Probably the cartridge; the model is a Grohe Eurosmart, replacements are about 25 EUR.",
            "Order one then.",
            "Ordered, it arrives Wednesday.",
        ],
        [
            "The boiler service is due, who did it last year?",
            "Heatwise Ltd, in October, they charged 95 EUR.",
            "Book them again for a weekday morning.",
            "Booked Heatwise for Tuesday 9 am.",
            "They also said the pressure should sit at 1.5 bar.",
            "I'll remind you to check the gauge monthly.",
        ],
        [
            "We're thinking of painting the living room.",
            "Any colour in mind?",
            "Something warm, my partner hates grey.",
            "Sage green or terracotta would be warm; I saved three swatches.",
            "Terracotta it is, we'll paint on the long weekend.",
        ],
    ], [
        ("The water leak comes from the warm-water side of the sink mixer.", 0, 2, True),
        ("The faucet is a Grohe Eurosmart and a new cartridge costs about 25 EUR.", 0, 3, False),
        ("The heating engineers charged ninety-five euros for last autumn's visit.", 1, 1, False),
        ("The heating system should hold a pressure of 1.5 bar.", 1, 4, True),
        ("The user's partner dislikes neutral ash-coloured walls.", 2, 2, False),
        ("The lounge will be redone in a clay-orange shade over the holiday break.", 2, 4, True),
    ]),
    "money": ("measure", [
        [
            "How much did we spend on groceries last month?",
            "612 EUR, about 80 more than February.",
            "Why the jump?",
            "Mostly the two dinner parties; the big shop on the 14th was 140 EUR.",
            "Set a budget of 550 for April.",
            "Budget set: 550 EUR for groceries in April, alerts at 80%.",
        ],
        [
            "My electricity contract ends in May.",
            "You pay 0.34 EUR per kWh now with Stadtwerke.",
            "Find me something cheaper and green.",
            "Ostrom offers 0.29 per kWh, 100% renewable, monthly cancellation.",
            "Switch to them.",
            "Switch requested; it takes effect on June 1.",
        ],
        [
            "Did the tax refund come?",
            "Yes, 1,240 EUR arrived on Monday.",
            "Put half into the ETF savings plan.",
            "Moved 620 EUR into the MSCI World plan.",
        ],
    ], [
        ("Food shopping cost more in March because of two evening gatherings with guests.", 0, 3, True),
        ("The monthly food spending limit for April is 550 EUR with a warning at eighty percent.", 0, 5, False),
        ("The current power supplier charges thirty-four cents a unit.", 1, 1, False),
        ("From the first of June the household's power comes from a renewable provider.", 1, 5, True),
        ("Half of this year's reimbursement from the revenue office went into index funds.", 2, 3, False),
        ("The user wanted something cheaper and ecological for energy.", 1, 2, True),
    ]),
    "garden": ("measure", [
        [
            "The tomatoes have yellow leaves at the bottom.",
            "Lower leaves yellowing is often early blight or too much water.",
            "It rained every day last week.",
            "Then remove the affected leaves and water only at the base, in the morning.",
            "Should I spray anything?",
            "A copper fungicide helps if the spots spread; wait a few days first.",
        ],
        [
            "I want to start composting.",
            "A bin or an open heap?",
            "A bin, the neighbours complained about smells before.",
            "A closed 300 litre bin with a lid; mix brown material like cardboard with the kitchen waste.",
            "Can I add citrus peel?",
            "Small amounts are fine, but no meat or dairy.",
        ],
        [
            "The lawn has bare patches after the dog's summer.",
            "Overseed in September when the soil is still warm.",
            "Which seed?",
            "A shade-tolerant mix, since the patches are under the walnut tree.",
        ],
    ], [
        ("Heavy daily rain probably caused the plants' discoloured lower foliage.", 0, 2, True),
        ("Only the roots should be watered, early in the day.", 0, 3, False),
        ("A lidded container is needed because people next door disliked odours.", 1, 2, False),
        ("Animal products like cheese or ham must not go into the compost.", 1, 5, True),
        ("The grass should get new seed in early autumn while the ground is warm.", 2, 1, False),
        ("The thin spots sit below the walnut, so the mix must cope with little sun.", 2, 3, True),
    ]),
    "study": ("measure", [
        [
            "I'm learning Spanish, can you quiz me daily?",
            "Sure, what level?",
            "A2, I finished the Duolingo tree last year.",
            "Then 15 minutes a day: 10 new words and one short reading.",
            "Skip the grammar drills, they bore me.",
            "Okay, only vocabulary and reading, no conjugation tables.",
        ],
        [
            "My exam for the B1 certificate is on June 12.",
            "The DELE B1? It has four parts.",
            "Yes, I'm worried about the listening part.",
            "Then we add two podcasts a week, Radio Ambulante is good for B1.",
            "Also find me a tutor for speaking.",
            "Booked Lucia on italki, Thursdays at 19:00, 22 USD per hour.",
        ],
        [
            "How many words do I know now?",
            "The deck has 1,180 cards, 940 of them mature.",
            "Good, slow down the new cards, I'm falling behind on reviews.",
            "New cards cut from 10 to 5 a day.",
        ],
    ], [
        ("The learner completed an online language app course twelve months ago.", 0, 2, False),
        ("Conjugation exercises are dull for the user and are left out.", 0, 4, True),
        ("The user is most anxious about the audio comprehension section.", 1, 2, False),
        ("A conversation teacher was hired for weekly evening lessons at 22 USD.", 1, 5, True),
        ("The flashcard collection holds 1,180 entries, 940 well learned.", 2, 1, False),
        ("Daily fresh vocabulary was halved because reviews were piling up.", 2, 3, True),
    ]),
    # Long turns, the shape of public long-conversation sets: two friends catching up, each turn
    # several sentences of chat, several facts drawn from one turn, each fact naming the speaker
    # and retelling the turn in other words (a daily jog for "I run every morning").
    "friends": ("long", [
        [
            "Hey Priya! Long time no talk. How have you been? Anything new since the spring? I feel like every month just disappears lately, work has been nonstop.",
            "Hi Tom! So much has happened. I finally signed up for the pottery class at the community centre, it's on Tuesday evenings, and last week I made my first bowl. It's very wobbly and a bit lopsided but I'm weirdly proud of it. My hands were covered in clay for days. What about you, what have you been up to?",
            "That sounds great, Priya, I'd love to see the bowl! I've been training for the city half marathon in October. I go out running four mornings a week before work, and on Sundays I do a long slow run along the river with my neighbour Ravi. It's the first time I've stuck to a plan for this long.",
            "Wow, a half marathon! Is that your first one? I remember you hated running at school, you always hid behind the gym during the cross-country.",
            "Ha, guilty. Yes, it's my first one. My knee started hurting in June, so I saw a physio who gave me a set of strengthening exercises, squats and step-ups mostly, and since then it's been fine. I'd like to finish in under two hours, but mostly I just want to enjoy it.",
            "You'll do it, I'm sure. Oh, and big news on our side: in July we adopted a rescue dog, a three-year-old greyhound called Biscuit. He sleeps about twenty hours a day, he's scared of the vacuum cleaner, and he steals socks whenever he gets the chance.",
            "A greyhound! They're such gentle dogs. You have to send me pictures of Biscuit. Are you still working at the bookshop on the high street?",
            "Still at the bookshop, yes, but I moved over to the children's section in the summer, and now I run a story hour every Saturday morning. The kids are loud and someone always cries, but honestly it's my favourite part of the week.",
        ],
        [
            "Priya, guess what, I did it, I finished the half marathon yesterday! One hour fifty-four, and the knee held up the whole way. The last two kilometres were brutal but the crowd kept me going.",
            "Tom, that's amazing, congratulations! Under two hours on your very first try, I knew you could do it. Did you do anything to celebrate afterwards?",
            "We went for ramen with Ravi afterwards, at that little place near the station that always has a long queue. I could barely walk up the stairs. Next I want to try a trail race in the spring, something with hills and mud, just to see if I like it.",
            "Trail running sounds tough, rather you than me. My news is smaller: my pottery teacher said my glazes are really improving, and I've got a table at the winter craft fair in December where I'm going to sell six mugs. I'm nervous nobody will buy them.",
            "Six mugs at a craft fair, that's not small at all! I'll come and buy one myself. What colours are you doing?",
            "Mostly a deep blue glaze with a speckled rim, it reminds me of the sea in Cornwall. Biscuit already knocked one off the shelf with his tail, so now it's five mugs and a lesson about where to put shelves.",
            "Poor Biscuit, or poor mug, I'm not sure which. Are you still doing the story hour at the bookshop?",
            "Yes, the story hour is still going, and now the shop has asked me to start a book club for teenagers in January. I'm a bit nervous, I've never run a club before and teenagers are a tough crowd.",
        ],
    ], [
        ("Priya attends a pottery course at the local community centre every Tuesday night.", 0, 1, True),
        ("Priya recently made her first bowl, which came out lopsided.", 0, 1, False),
        ("Tom trains for a half marathon by jogging on several weekday mornings and doing a long Sunday run with his neighbour.", 0, 2, False),
        ("Tom did physiotherapy exercises for his knee after it hurt in June.", 0, 4, True),
        ("Priya adopted Biscuit, a rescue greyhound, in July.", 0, 5, False),
        ("Priya leads a story hour for children at the bookshop on Saturdays.", 0, 7, True),
        ("Tom completed his first half marathon in 1:54.", 1, 0, True),
        ("Tom is interested in a hilly trail race next spring.", 1, 2, False),
        ("Priya will sell her mugs at a winter craft fair in December.", 1, 3, True),
        ("Priya's mugs are glazed blue with a speckled rim.", 1, 5, False),
        ("Priya was asked to set up a teenage book club at the bookshop.", 1, 7, False),
    ]),
    "neighbours": ("long", [
        [
            "Morning Lena! How was the trip to Portugal? You look so relaxed, I'm jealous. We haven't been anywhere in ages.",
            "Hi Sam! It was wonderful, thank you. We spent ten days between Lisbon and Porto, ate far too many custard tarts, and I finally tried surfing in Ericeira. I fell off about fifty times but I stood up twice, so I'm counting it as a success.",
            "Surfing! That's brave of you. We stayed home this summer because Jonas started his new job at the hospital, he's working as a night-shift nurse now, so our whole routine has been turned upside down.",
            "Night shifts are so hard on the body. Is he managing to sleep during the day with all the building work going on in the street?",
            "Not really, the drilling starts at eight every morning. We bought blackout curtains and some good earplugs, and he sleeps in the back room now, which is quieter because it faces the garden.",
            "That's smart. By the way, I started a vegetable patch in the shared garden this year, tomatoes, courgettes and beans. The courgettes are completely out of control, do you want some? I have more than I can eat.",
            "Yes please, I'll make soup with them! I've been cooking a lot more since Jonas works nights, mostly Indian dishes from a cookbook my sister gave me for my birthday. The dal is my favourite so far.",
            "Oh nice, which cookbook is it? I'm always looking for new curries to try, I've been stuck on the same three for years.",
        ],
        [
            "Lena, the new bakery on the corner finally opened! I got a sourdough loaf this morning and it was still warm when I got home.",
            "I saw the queue outside! Is it any good? I'd been baking my own sourdough since the spring, but my starter died in August while we were away in Portugal, and I haven't had the heart to start a new one.",
            "It's very good, a bit expensive though, six euros for one loaf. How is Jonas finding the hospital now? Is he still on nights?",
            "Much better, thanks for asking. In October he moved to day shifts on the children's ward, so he finally sleeps at night and we can eat dinner together again. It feels like getting him back.",
            "That's great news. And the vegetable patch, did the courgettes ever stop?",
            "They only stopped with the first frost. Next year I want to plant garlic in November and try growing strawberries along the fence, if the slugs leave me anything.",
            "Strawberries would be lovely. I'm actually thinking of joining the shared garden too, if there's a free plot somewhere.",
            "There's one free by the shed, I'll ask the committee for you. They meet on the first Monday of every month in the community hall.",
        ],
    ], [
        ("Lena holidayed in Lisbon and Porto and had a go at surfing.", 0, 1, True),
        ("Sam's partner Jonas took a job as a nurse working nights at the hospital.", 0, 2, False),
        ("Jonas sleeps in the back room with blackout curtains and earplugs to escape the construction noise.", 0, 4, True),
        ("Lena has a vegetable plot in the shared garden with tomatoes, courgettes and beans.", 0, 5, False),
        ("Sam has been cooking Indian food from a cookbook she got from her sister.", 0, 6, True),
        ("Bread at the new bakery on the corner costs six euros a loaf.", 1, 2, False),
        ("Lena lost her sourdough starter over the summer holiday.", 1, 1, True),
        ("Jonas switched to daytime work on the children's ward in October.", 1, 3, True),
        ("Lena wants to grow garlic and strawberries next year.", 1, 5, False),
        ("The shared garden committee meets monthly on the first Monday.", 1, 7, False),
    ]),
}

# (split, kind, a, b, label) - label: contradicts | consistent | unrelated
STATEMENTS = [
    # ---- tune
    ("tune", "negation", "User prefers tabs for indentation", "User no longer prefers tabs for indentation", "contradicts"),
    ("tune", "negation", "Deploys run on Fridays", "Deploys never run on Fridays", "contradicts"),
    ("tune", "negation", "A man is walking outside", "There is no man walking outside", "contradicts"),
    ("tune", "negation", "The staging database is backed up nightly", "The staging database is not backed up", "contradicts"),
    ("tune", "negation", "A woman is slicing an onion", "Nobody is slicing an onion", "contradicts"),
    ("tune", "negation", "The cat is sleeping on the sofa", "The cat is not sleeping on the sofa", "contradicts"),
    ("tune", "antonym", "Dark mode is enabled in the dashboard", "Dark mode is disabled in the dashboard", "contradicts"),
    ("tune", "antonym", "Alice likes the weekly sync meeting", "Alice dislikes the weekly sync meeting", "contradicts"),
    ("tune", "antonym", "A boy is sitting on the bench", "A boy is standing on the bench", "contradicts"),
    ("tune", "antonym", "The children are playing indoors", "The children are playing outdoors", "contradicts"),
    ("tune", "antonym", "The glass on the table is full", "The glass on the table is empty", "contradicts"),
    ("tune", "antonym", "The shop opens early on Sundays", "The shop opens late on Sundays", "contradicts"),
    ("tune", "agent", "A man is playing the guitar", "A woman is playing the guitar", "contradicts"),
    ("tune", "agent", "A dog is chasing a ball in the park", "A cat is chasing a ball in the park", "contradicts"),
    ("tune", "agent", "A girl is riding a horse", "A boy is riding a horse", "contradicts"),
    ("tune", "value", "The API uses Python 3.11", "The API uses Python 3.12", "contradicts"),
    ("tune", "value", "Invoices are rounded half up to 2 decimals", "Invoices are rounded half up to 4 decimals", "contradicts"),
    ("tune", "value", "The reporting database runs Postgres 15.6", "The reporting database runs Postgres 16", "contradicts"),
    ("tune", "value", "The team standup is on Monday", "The team standup is on Wednesday", "contradicts"),
    ("tune", "consistent", "User prefers tabs for indentation", "User uses tabs in scratch scripts", "consistent"),
    ("tune", "consistent", "Deploys run on Fridays", "Deploys run after the Friday standup", "consistent"),
    ("tune", "consistent", "The API uses Python 3.11", "The API was moved to Python 3.11 last year", "consistent"),
    ("tune", "consistent", "A man is walking outside", "A man is walking outdoors on the street", "consistent"),
    ("tune", "consistent", "A boy is sitting on the bench", "A young boy sits on a park bench", "consistent"),
    ("tune", "consistent", "A man is playing the guitar", "A man is playing a guitar on stage", "consistent"),
    ("tune", "consistent", "Alerts are grouped by service, not by host", "Alerts are grouped by service rather than by host", "consistent"),
    ("tune", "consistent", "The reporting database runs Postgres 15.6", "The reporting database runs Postgres 15", "consistent"),
    ("tune", "consistent", "The CI user had no write access to the registry, so we granted it",
     "The CI user lacked write access to the registry; we granted it", "consistent"),
    ("tune", "consistent", "A woman is slicing an onion", "A woman is cutting an onion into pieces", "consistent"),
    ("tune", "consistent", "The glass on the table is full", "There is a full glass on the table", "consistent"),
    ("tune", "unrelated", "A man is playing the guitar", "A chef is slicing tomatoes in a kitchen", "unrelated"),
    ("tune", "unrelated", "The API uses Python 3.11", "The office plants need watering on Monday", "unrelated"),
    ("tune", "unrelated", "Dark mode is enabled in the dashboard", "The invoice template uses the company logo", "unrelated"),
    ("tune", "unrelated", "A dog is chasing a ball in the park", "A woman is reading a newspaper on a train", "unrelated"),
    # ---- measure
    ("measure", "negation", "The backup job runs every night", "The backup job does not run every night", "contradicts"),
    ("measure", "negation", "A man is riding a bicycle", "No man is riding a bicycle", "contradicts"),
    ("measure", "negation", "The user drinks coffee in the morning", "The user never drinks coffee in the morning", "contradicts"),
    ("measure", "negation", "Two kids are swimming in the pool", "There are no kids swimming in the pool", "contradicts"),
    ("measure", "negation", "The feature flag is on for beta users", "The feature flag is not on for beta users", "contradicts"),
    ("measure", "negation", "A woman is dancing on the stage", "A woman is not dancing on the stage", "contradicts"),
    ("measure", "antonym", "The user likes spicy food", "The user hates spicy food", "contradicts"),
    ("measure", "antonym", "A man is sitting in a chair", "A man is standing next to a chair", "contradicts"),
    ("measure", "antonym", "The meeting room is empty", "The meeting room is full", "contradicts"),
    ("measure", "antonym", "The kids are eating lunch outdoors", "The kids are eating lunch indoors", "contradicts"),
    ("measure", "antonym", "Public sign-up is allowed on the forum", "Public sign-up is blocked on the forum", "contradicts"),
    ("measure", "antonym", "The door of the server room is open", "The door of the server room is closed", "contradicts"),
    ("measure", "agent", "A woman is cutting a tomato", "A man is cutting a tomato", "contradicts"),
    ("measure", "agent", "A man is feeding a cat", "A man is feeding a dog", "contradicts"),
    ("measure", "agent", "A boy is playing the piano", "A girl is playing the piano", "contradicts"),
    ("measure", "value", "The search service uses pgvector 0.7.4", "The search service uses pgvector 0.8.0", "contradicts"),
    ("measure", "value", "The retention period for logs is 30 days", "The retention period for logs is 90 days", "contradicts"),
    ("measure", "value", "The user's flat is on floor 3", "The user's flat is on floor 5", "contradicts"),
    ("measure", "value", "The gym class is on Tuesday", "The gym class is on Thursday", "contradicts"),
    ("measure", "consistent", "The backup job runs every night", "Every night the backup job runs at 2 am", "consistent"),
    ("measure", "consistent", "A man is riding a bicycle", "A man rides a bike down the road", "consistent"),
    ("measure", "consistent", "The user likes spicy food", "The user enjoys spicy Thai curries", "consistent"),
    ("measure", "consistent", "A man is sitting in a chair", "A man sits on a wooden chair", "consistent"),
    ("measure", "consistent", "The search service uses pgvector 0.7.4", "pgvector 0.7.4 powers the search index", "consistent"),
    ("measure", "consistent", "Recall@10 was 0.962 with ef_search 40 and 0.991 with ef_search 100",
     "With ef_search 40 the recall@10 was 0.962", "consistent"),
    ("measure", "consistent", "Python 3.11 and Python 3.12 pass CI on Node 20", "Python 3.11 passes CI on Node 18 and Node 20", "consistent"),
    ("measure", "consistent", "Cluster upgrade: check the node logs first, no restarts during business hours",
     "Cluster upgrade: 1. Check the node logs. 2. No restarts during business hours without a health check", "consistent"),
    ("measure", "consistent", "A woman is cutting a tomato", "A woman slices a red tomato", "consistent"),
    ("measure", "consistent", "The meeting room is empty", "Nobody is in the meeting room", "consistent"),
    ("measure", "consistent", "The kids are eating lunch outdoors", "Children are having lunch outside in the garden", "consistent"),
    ("measure", "unrelated", "A man is riding a bicycle", "A woman is watering the flowers", "unrelated"),
    ("measure", "unrelated", "The retention period for logs is 30 days", "The user's flat is on floor 3", "unrelated"),
    ("measure", "unrelated", "The user likes spicy food", "The server room door has a keypad", "unrelated"),
    ("measure", "unrelated", "The gym class is on Tuesday", "Public sign-up is allowed on the forum", "unrelated"),
]

# A question a user might ask whose answer is the fact (and whose evidence is the fact's source
# turn): what bench/quality.py retrieves with, plain and expanded through the links.
QUESTIONS = {
    "ops-fact0": "How did we fix the migration that kept timing out?",
    "ops-fact1": "Which version is the payments service on?",
    "ops-fact2": "What made search slow?",
    "ops-fact3": "How many connections can the database take?",
    "ops-fact4": "What is the connection pool size now?",
    "ops-fact5": "How long does a restore of the backup take?",
    "ops-fact6": "When did we last practise a restore?",
    "dev-fact0": "How is Python indented in the team repo?",
    "dev-fact1": "What indentation do my scratch scripts use?",
    "dev-fact2": "Which colour theme does my editor use?",
    "dev-fact3": "Is the settings screen written in TypeScript?",
    "dev-fact4": "How many tests cover the settings form?",
    "dev-fact5": "How is the CI dependency cache keyed?",
    "dev-fact6": "What was wrong with the flaky e2e test?",
    "travel-fact0": "Do I like morning or evening trains?",
    "travel-fact1": "Where am I staying in Berlin?",
    "travel-fact2": "What kind of hotel fits my budget?",
    "travel-fact3": "Do I enjoy beach holidays?",
    "travel-fact4": "Do I fly or take the train for short trips?",
    "travel-fact5": "When does my passport expire?",
    "health-fact0": "How far do I usually run?",
    "health-fact1": "What did the doctor say about coffee?",
    "health-fact2": "What was my vitamin D result?",
    "health-fact3": "When does the supplement reminder go off?",
    "health-fact4": "Which medicine am I allergic to?",
    "health-fact5": "Which food makes me ill?",
    "home-fact0": "Which side of the kitchen tap is leaking?",
    "home-fact1": "What model is the kitchen tap and what does the spare part cost?",
    "home-fact2": "How much did the heating service cost?",
    "home-fact3": "What pressure should the boiler show?",
    "home-fact4": "Which wall colour does my partner not like?",
    "home-fact5": "What colour are we painting the living room, and when?",
    "money-fact0": "Why were groceries so expensive in March?",
    "money-fact1": "What is the grocery budget for April?",
    "money-fact2": "What do I pay for electricity?",
    "money-fact3": "When does the new electricity contract start?",
    "money-fact4": "What did I do with the tax refund?",
    "money-fact5": "What did I want from a new energy contract?",
    "garden-fact0": "Why are the tomato leaves turning yellow?",
    "garden-fact1": "How should I water the tomatoes?",
    "garden-fact2": "Why do I need a closed compost bin?",
    "garden-fact3": "Can meat go in the compost?",
    "garden-fact4": "When should I reseed the lawn?",
    "garden-fact5": "Why do the bare patches need a special seed mix?",
    "study-fact0": "What Spanish did I study before?",
    "study-fact1": "Do I want grammar drills?",
    "study-fact2": "Which part of the exam worries me most?",
    "study-fact3": "Who teaches my speaking lessons and what do they cost?",
    "study-fact4": "How big is my flashcard deck?",
    "study-fact5": "How many new cards do I do per day now?",
    "friends-fact0": "When is Priya's pottery class?",
    "friends-fact1": "What was the first thing Priya made at pottery?",
    "friends-fact2": "How is Tom training for his race?",
    "friends-fact3": "What did Tom do about his sore knee?",
    "friends-fact4": "What kind of dog did Priya get?",
    "friends-fact5": "What does Priya do on Saturday mornings?",
    "friends-fact6": "What was Tom's half marathon time?",
    "friends-fact7": "What race does Tom want to do next?",
    "friends-fact8": "Where is Priya selling her pottery?",
    "friends-fact9": "What do Priya's mugs look like?",
    "friends-fact10": "What new thing will Priya run at the bookshop?",
    "neighbours-fact0": "Where did Lena go on holiday?",
    "neighbours-fact1": "What is Jonas's job?",
    "neighbours-fact2": "How does Jonas manage to sleep during the day?",
    "neighbours-fact3": "What is Lena growing?",
    "neighbours-fact4": "What has Sam been cooking lately?",
    "neighbours-fact5": "How much is the bread at the new bakery?",
    "neighbours-fact6": "What happened to Lena's sourdough starter?",
    "neighbours-fact7": "Does Jonas still work nights?",
    "neighbours-fact8": "What will Lena plant next year?",
    "neighbours-fact9": "When does the garden committee meet?",
}


def chat_rows() -> list[dict]:
    rows = []
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    for c, (chat, (split, sessions, facts)) in enumerate(CHATS.items()):
        base = start + timedelta(days=40 * c)
        session_start = []
        for s, turns in enumerate(sessions):
            begin = base + timedelta(days=4 * s, hours=s)
            session_start.append(begin)
            for t, content in enumerate(turns):
                rows.append({"split": split, "namespace": chat, "id": f"{chat}-s{s}-t{t}", "tier": "episodic",
                             "content": content, "session_id": f"{chat}-s{s}",
                             "timestamp": (begin + timedelta(minutes=2 * t)).isoformat(), "source": None})
        for f, (content, s, t, dated) in enumerate(facts):
            stamp = session_start[s] + timedelta(hours=2) if dated else None
            rows.append({"split": split, "namespace": chat, "id": f"{chat}-fact{f}", "tier": "semantic",
                         "content": content, "session_id": None, "timestamp": stamp.isoformat() if stamp else None,
                         "source": f"{chat}-s{s}-t{t}", "question": QUESTIONS[f"{chat}-fact{f}"]})
    return rows


def statement_rows() -> list[dict]:
    # An agent pair is a contradiction only as two accounts of one event, which text alone cannot
    # say ("A boy / A girl is standing next to the fountain" may both be true): its two sides are
    # dated to the same moment (`same_moment`), as two accounts of one scene would be.
    return [{"split": split, "id": f"st{i:03d}", "kind": kind, "a": a, "b": b, "label": label,
             **({"same_moment": True} if kind == "agent" else {})}
            for i, (split, kind, a, b, label) in enumerate(STATEMENTS)]


def main() -> None:
    for name, rows in (("chats", chat_rows()), ("statements", statement_rows())):
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{name}.jsonl: {len(rows)} rows")


if __name__ == "__main__":
    main()

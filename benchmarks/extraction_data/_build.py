# ruff: noqa: E501  (labelled prose: one passage a line)
"""Writes the labelled prose passages (run once; the JSONL files are the data)."""

import json
from pathlib import Path

ORG = {"Leads": ("Person", "Team"), "MemberOf": ("Person", "Team"), "ReportsTo": ("Person", "Person")}
SW = {"DependsOn": ("Package", "Package"), "Maintains": ("Person", "Package"), "Replaces": ("Package", "Package")}

ORG_TRAIN = [
    (
        "Maria Kowalski leads the Platform team at Brightwater Logistics. Two engineers report to her, Dev Patel and Hana Sato. Dev joined the company in March and still sits near the Billing team, although Maria is his manager now.",
        [
            ("Leads", "Maria Kowalski", "Platform"),
            ("ReportsTo", "Dev Patel", "Maria Kowalski"),
            ("ReportsTo", "Hana Sato", "Maria Kowalski"),
        ],
    ),
    (
        "The Billing team is run by Omar Haddad. Omar manages Lucia Ferrante and Ben Okafor, who both joined Billing last year. Lucia is also a member of the Security team.",
        [
            ("Leads", "Omar Haddad", "Billing"),
            ("ReportsTo", "Lucia Ferrante", "Omar Haddad"),
            ("ReportsTo", "Ben Okafor", "Omar Haddad"),
            ("MemberOf", "Lucia Ferrante", "Billing"),
            ("MemberOf", "Ben Okafor", "Billing"),
            ("MemberOf", "Lucia Ferrante", "Security"),
        ],
    ),
    (
        "Grace Liu heads Data Engineering. Her team is small: Arjun Mehta and Sofia Reyes work on it, and both report to Grace. Arjun previously worked on Platform under Maria Kowalski.",
        [
            ("Leads", "Grace Liu", "Data Engineering"),
            ("MemberOf", "Arjun Mehta", "Data Engineering"),
            ("MemberOf", "Sofia Reyes", "Data Engineering"),
            ("ReportsTo", "Arjun Mehta", "Grace Liu"),
            ("ReportsTo", "Sofia Reyes", "Grace Liu"),
        ],
    ),
    (
        "Tomasz Wiśniewski is the chief technology officer. Maria Kowalski, Omar Haddad and Grace Liu all report to Tomasz. He also leads the Architecture team himself.",
        [
            ("ReportsTo", "Maria Kowalski", "Tomasz Wiśniewski"),
            ("ReportsTo", "Omar Haddad", "Tomasz Wiśniewski"),
            ("ReportsTo", "Grace Liu", "Tomasz Wiśniewski"),
            ("Leads", "Tomasz Wiśniewski", "Architecture"),
        ],
    ),
    (
        "Priya Nair joined Brightwater in June as a designer on the Mobile team. The Mobile team is led by Kenji Watanabe, and Priya reports to him. Kenji in turn reports to Tomasz Wiśniewski.",
        [
            ("MemberOf", "Priya Nair", "Mobile"),
            ("Leads", "Kenji Watanabe", "Mobile"),
            ("ReportsTo", "Priya Nair", "Kenji Watanabe"),
            ("ReportsTo", "Kenji Watanabe", "Tomasz Wiśniewski"),
        ],
    ),
    (
        "Elena Petrova manages the Support team. Support has three people besides Elena: Jamal Carter, Ines Duarte and Felix Braun. Jamal and Ines report to Elena directly; Felix reports to Omar Haddad while he finishes a billing project.",
        [
            ("Leads", "Elena Petrova", "Support"),
            ("MemberOf", "Jamal Carter", "Support"),
            ("MemberOf", "Ines Duarte", "Support"),
            ("MemberOf", "Felix Braun", "Support"),
            ("ReportsTo", "Jamal Carter", "Elena Petrova"),
            ("ReportsTo", "Ines Duarte", "Elena Petrova"),
            ("ReportsTo", "Felix Braun", "Omar Haddad"),
        ],
    ),
    (
        "Noah Schmidt is an engineer on the Search team. His manager is Aisha Bello, who leads Search and Recommendations. Noah mentors two interns, but they report to Aisha as well.",
        [
            ("MemberOf", "Noah Schmidt", "Search"),
            ("ReportsTo", "Noah Schmidt", "Aisha Bello"),
            ("Leads", "Aisha Bello", "Search"),
            ("Leads", "Aisha Bello", "Recommendations"),
        ],
    ),
    (
        "The Infrastructure team has a new lead, Carlos Mendes. Carlos reports to Tomasz Wiśniewski and manages Yuki Tanaka and Olga Ivanova. Yuki is on call this week.",
        [
            ("Leads", "Carlos Mendes", "Infrastructure"),
            ("ReportsTo", "Carlos Mendes", "Tomasz Wiśniewski"),
            ("ReportsTo", "Yuki Tanaka", "Carlos Mendes"),
            ("ReportsTo", "Olga Ivanova", "Carlos Mendes"),
        ],
    ),
    (
        "Hana Sato moved from Platform to the Billing team in September. She now reports to Omar Haddad. Her old manager, Maria Kowalski, hired Leo Martin to take her place on Platform.",
        [
            ("MemberOf", "Hana Sato", "Billing"),
            ("ReportsTo", "Hana Sato", "Omar Haddad"),
            ("MemberOf", "Leo Martin", "Platform"),
        ],
    ),
    (
        "Fatima Zahra leads the Analytics team, which the data engineers of Grace Liu support. Two analysts, Marco Rossi and Chloe Dubois, work in Analytics and report to Fatima.",
        [
            ("Leads", "Fatima Zahra", "Analytics"),
            ("MemberOf", "Marco Rossi", "Analytics"),
            ("MemberOf", "Chloe Dubois", "Analytics"),
            ("ReportsTo", "Marco Rossi", "Fatima Zahra"),
            ("ReportsTo", "Chloe Dubois", "Fatima Zahra"),
        ],
    ),
]

ORG_HELDOUT = [
    (
        "At Norvale Robotics, Ingrid Larsen heads the Perception team. Rahul Singh and Mei Chen are the two researchers of the team, and Ingrid manages both of them. Rahul came from a startup in Oslo.",
        [
            ("Leads", "Ingrid Larsen", "Perception"),
            ("MemberOf", "Rahul Singh", "Perception"),
            ("MemberOf", "Mei Chen", "Perception"),
            ("ReportsTo", "Rahul Singh", "Ingrid Larsen"),
            ("ReportsTo", "Mei Chen", "Ingrid Larsen"),
        ],
    ),
    (
        "Samuel Adeyemi runs Controls. Samuel reports to the vice president of engineering, Laura Becker. Laura also leads the Safety team, which has one engineer, Pavel Novak.",
        [
            ("Leads", "Samuel Adeyemi", "Controls"),
            ("ReportsTo", "Samuel Adeyemi", "Laura Becker"),
            ("Leads", "Laura Becker", "Safety"),
            ("MemberOf", "Pavel Novak", "Safety"),
        ],
    ),
    (
        "Mei Chen was promoted in April and now leads the Mapping team. Two engineers, Diego Alvarez and Anna Kowalczyk, moved with her to Mapping and report to Mei. Ingrid Larsen remains the manager of Mei.",
        [
            ("Leads", "Mei Chen", "Mapping"),
            ("MemberOf", "Diego Alvarez", "Mapping"),
            ("MemberOf", "Anna Kowalczyk", "Mapping"),
            ("ReportsTo", "Diego Alvarez", "Mei Chen"),
            ("ReportsTo", "Anna Kowalczyk", "Mei Chen"),
            ("ReportsTo", "Mei Chen", "Ingrid Larsen"),
        ],
    ),
    (
        "Laura Becker manages Ingrid Larsen and Samuel Adeyemi. Laura herself reports to Victor Lemaire, the chief executive. Victor also leads the small Strategy team.",
        [
            ("ReportsTo", "Ingrid Larsen", "Laura Becker"),
            ("ReportsTo", "Samuel Adeyemi", "Laura Becker"),
            ("ReportsTo", "Laura Becker", "Victor Lemaire"),
            ("Leads", "Victor Lemaire", "Strategy"),
        ],
    ),
    (
        "The Hardware team is led by Akira Yamamoto. The team of Akira includes Zoe Clarke and Omar Farouk, who both report to him. Zoe joined from a drone company last spring.",
        [
            ("Leads", "Akira Yamamoto", "Hardware"),
            ("MemberOf", "Zoe Clarke", "Hardware"),
            ("MemberOf", "Omar Farouk", "Hardware"),
            ("ReportsTo", "Zoe Clarke", "Akira Yamamoto"),
            ("ReportsTo", "Omar Farouk", "Akira Yamamoto"),
        ],
    ),
    (
        "Nadia Hussein joined Norvale as a firmware engineer on the Hardware team. She reports to Akira Yamamoto. Nadia works closely with Pavel Novak from Safety, but Pavel is not her manager.",
        [
            ("MemberOf", "Nadia Hussein", "Hardware"),
            ("ReportsTo", "Nadia Hussein", "Akira Yamamoto"),
            ("MemberOf", "Pavel Novak", "Safety"),
        ],
    ),
    (
        "Tobias Weber leads Simulation. Lina Haddad, one of its engineers, reports to Tobias, and so does Kofi Mensah, who joined in May. Tobias reports to Laura Becker.",
        [
            ("Leads", "Tobias Weber", "Simulation"),
            ("MemberOf", "Lina Haddad", "Simulation"),
            ("ReportsTo", "Lina Haddad", "Tobias Weber"),
            ("ReportsTo", "Kofi Mensah", "Tobias Weber"),
            ("ReportsTo", "Tobias Weber", "Laura Becker"),
        ],
    ),
    (
        "Ruth Goldberg is the head of People Operations at Norvale. Ruth manages Carmen Ortiz, a recruiter. Carmen works with every team lead, including Akira Yamamoto and Mei Chen.",
        [("Leads", "Ruth Goldberg", "People Operations"), ("ReportsTo", "Carmen Ortiz", "Ruth Goldberg")],
    ),
]

SW_TRAIN = [
    (
        "Lattice is a small web framework written by Ada Brennan, who still maintains it. Lattice depends on Wirecodec for its HTTP parsing and on Tempo for scheduling. Ada reviews every pull request herself.",
        [
            ("Maintains", "Ada Brennan", "Lattice"),
            ("DependsOn", "Lattice", "Wirecodec"),
            ("DependsOn", "Lattice", "Tempo"),
        ],
    ),
    (
        "Tempo is maintained by Ravi Kumar and Helen Ocampo. It needs Clockwork for time zones. Helen wrote most of the documentation.",
        [
            ("Maintains", "Ravi Kumar", "Tempo"),
            ("Maintains", "Helen Ocampo", "Tempo"),
            ("DependsOn", "Tempo", "Clockwork"),
        ],
    ),
    (
        "Wirecodec replaced the older Httpkit parser in 2021. Httpkit is no longer maintained. The maintainer of Wirecodec, Jonas Berg, kept it free of dependencies.",
        [("Replaces", "Wirecodec", "Httpkit"), ("Maintains", "Jonas Berg", "Wirecodec")],
    ),
    (
        "Several tools are built on Lattice. Formwork, a form library maintained by Ada Brennan, uses Lattice and Validata. Validata itself is looked after by Kwame Asante.",
        [
            ("Maintains", "Ada Brennan", "Formwork"),
            ("DependsOn", "Formwork", "Lattice"),
            ("DependsOn", "Formwork", "Validata"),
            ("Maintains", "Kwame Asante", "Validata"),
        ],
    ),
    (
        "Clockwork is maintained by Sofia Lindqvist. Since version 3, Clockwork requires Tzdata to read time zone files. Sofia plans to drop that dependency next year.",
        [("Maintains", "Sofia Lindqvist", "Clockwork"), ("DependsOn", "Clockwork", "Tzdata")],
    ),
    (
        "Quiver is a task queue that Marcus Webb started in 2019. Marcus maintains Quiver together with Jiwoo Park. Quiver depends on Tempo and on the Redline client.",
        [
            ("Maintains", "Marcus Webb", "Quiver"),
            ("Maintains", "Jiwoo Park", "Quiver"),
            ("DependsOn", "Quiver", "Tempo"),
            ("DependsOn", "Quiver", "Redline"),
        ],
    ),
    (
        "Redline is a client for key-value stores. It superseded Keystone, which Ravi Kumar had maintained for ten years. Ravi now maintains Redline.",
        [("Replaces", "Redline", "Keystone"), ("Maintains", "Ravi Kumar", "Redline")],
    ),
    (
        "The admin panel of Lattice, Dashboard, pulls in Formwork and Chartly. Chartly is maintained by Elif Yilmaz. Elif also contributes to Formwork.",
        [
            ("DependsOn", "Dashboard", "Formwork"),
            ("DependsOn", "Dashboard", "Chartly"),
            ("Maintains", "Elif Yilmaz", "Chartly"),
        ],
    ),
    (
        "Validata is used by Formwork and by Quiver. Kwame Asante and Lena Fischer maintain it.",
        [
            ("DependsOn", "Formwork", "Validata"),
            ("DependsOn", "Quiver", "Validata"),
            ("Maintains", "Kwame Asante", "Validata"),
            ("Maintains", "Lena Fischer", "Validata"),
        ],
    ),
    (
        "Chartly replaces Plotline, an older charting package. Chartly depends on Vectormath for its geometry. Vectormath is maintained by Oskar Nilsson.",
        [
            ("Replaces", "Chartly", "Plotline"),
            ("DependsOn", "Chartly", "Vectormath"),
            ("Maintains", "Oskar Nilsson", "Vectormath"),
        ],
    ),
]

SW_HELDOUT = [
    (
        "Meridian is a database migration tool maintained by Grace Okonkwo. It relies on Sqlbridge to talk to databases and on Yamlette to read its configuration. Grace started the project in 2018.",
        [
            ("Maintains", "Grace Okonkwo", "Meridian"),
            ("DependsOn", "Meridian", "Sqlbridge"),
            ("DependsOn", "Meridian", "Yamlette"),
        ],
    ),
    (
        "Sqlbridge is looked after by Thomas Keller and Amara Diallo. Sqlbridge needs Poolside for connection pooling. Thomas also reviews patches for Meridian, but he does not maintain it.",
        [
            ("Maintains", "Thomas Keller", "Sqlbridge"),
            ("Maintains", "Amara Diallo", "Sqlbridge"),
            ("DependsOn", "Sqlbridge", "Poolside"),
        ],
    ),
    (
        "Yamlette took the place of Confparse, which was abandoned in 2020. Its maintainer, Mateo Silva, keeps Yamlette free of dependencies.",
        [("Replaces", "Yamlette", "Confparse"), ("Maintains", "Mateo Silva", "Yamlette")],
    ),
    (
        "Poolside is used by Sqlbridge and by Streamline. Its maintainer is Hannah Weiss. Hannah inherited Poolside from its author, Igor Petrov.",
        [
            ("DependsOn", "Sqlbridge", "Poolside"),
            ("DependsOn", "Streamline", "Poolside"),
            ("Maintains", "Hannah Weiss", "Poolside"),
        ],
    ),
    (
        "Streamline is an event pipeline built on Meridian and Poolside. Streamline is maintained by Chen Wei. Chen is replacing its old logger, Logjam, with Tracelog.",
        [
            ("DependsOn", "Streamline", "Meridian"),
            ("DependsOn", "Streamline", "Poolside"),
            ("Maintains", "Chen Wei", "Streamline"),
            ("Replaces", "Tracelog", "Logjam"),
        ],
    ),
    (
        "Tracelog was written by Priyanka Rao, who still maintains it. Tracelog depends on Clockface for timestamps. Clockface is maintained by Priyanka as well.",
        [
            ("Maintains", "Priyanka Rao", "Tracelog"),
            ("DependsOn", "Tracelog", "Clockface"),
            ("Maintains", "Priyanka Rao", "Clockface"),
        ],
    ),
    (
        "Yamlette depends on nothing but Unicorder, a small text library. Unicorder is maintained by Mateo Silva and Beatriz Costa. Beatriz also maintains the documentation site of Meridian, Docsmith.",
        [
            ("DependsOn", "Yamlette", "Unicorder"),
            ("Maintains", "Mateo Silva", "Unicorder"),
            ("Maintains", "Beatriz Costa", "Unicorder"),
            ("Maintains", "Beatriz Costa", "Docsmith"),
        ],
    ),
    (
        "Migrator, the predecessor of Meridian, is no longer developed: Meridian superseded it in 2019. Migrator used Sqlbridge as well. Grace Okonkwo archived Migrator last year.",
        [("Replaces", "Meridian", "Migrator"), ("DependsOn", "Migrator", "Sqlbridge")],
    ),
]


def rows(passages, labels):
    out = []
    for text, rels in passages:
        entities = {}
        relations = []
        for label, s, o in rels:
            sl, ol = labels[label]
            assert s in text or s.split()[0] in text, (s, text)
            assert o in text or o.split()[0] in text, (o, text)
            entities.setdefault((sl, s), {"label": sl, "name": s})
            entities.setdefault((ol, o), {"label": ol, "name": o})
            relations.append({"label": label, "subject": {"label": sl, "name": s}, "object": {"label": ol, "name": o}})
        out.append({"x": {"text": text}, "y": {"entities": list(entities.values()), "relations": relations}})
    return out


here = Path(__file__).parent
for name, passages, labels in (
    ("org_train", ORG_TRAIN, ORG),
    ("org_heldout", ORG_HELDOUT, ORG),
    ("software_train", SW_TRAIN, SW),
    ("software_heldout", SW_HELDOUT, SW),
):
    lines = [json.dumps(r, ensure_ascii=False) for r in rows(passages, labels)]
    (here / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(
        name,
        len(lines),
        sum(len(r["y"]["relations"]) for r in rows(passages, labels)),
        max(len(p[0]) for p in passages),
    )

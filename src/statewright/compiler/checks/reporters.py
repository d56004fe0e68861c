"""Which module reports each diagnostic code, stage by stage in the order the stages run.

The checks come in the order `check_machine` runs them, with the stages before and after them and the
faces that report codes of their own. docs/architecture.md's table is generated from this one
(docs/generate.py), and tests/test_architecture.py holds it to the code: each module names exactly the
codes listed for it, and every registered code is listed. A new check adds its row here.
"""

from __future__ import annotations

REPORTED_BY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("read", "spec_paths.py", ("SW1022",)),
    ("parse", "grammar/parser.py", ("SW1005", "SW1020", "SW1021", "SW9001")),
    ("parse", "grammar/build.py", ("SW1006", "SW3015")),
    ("parse", "grammar/syntax_errors.py", ("SW1001", "SW1002", "SW1003", "SW1004", "SW1010", "SW1011", "SW1012",
                                           "SW1013", "SW1014", "SW1015", "SW1030", "SW1031", "SW1032", "SW1033")),
    ("parse", "grammar/recovery.py", ("SW9001",)),
    ("check", "compiler/checks/resolve.py", ("SW2001", "SW2002", "SW2003", "SW2004", "SW2005", "SW2010", "SW2012",
                                             "SW2013", "SW2014", "SW2020", "SW4030", "SW6001")),
    ("check", "compiler/checks/constraints.py", ("SW2010", "SW4022", "SW4023", "SW4024", "SW4025", "SW7021")),
    ("check", "compiler/checks/fanout.py", ("SW2060", "SW3060", "SW3061", "SW3062", "SW3063", "SW3064", "SW3065",
                                            "SW3066", "SW3067", "SW3068", "SW3069", "SW3070", "SW3071", "SW3072",
                                            "SW7060")),
    ("check", "compiler/checks/typecheck.py", ("SW2002", "SW2006", "SW2007", "SW2009", "SW2010", "SW2011", "SW4001",
                                               "SW4002", "SW4004", "SW4005", "SW4006", "SW4008", "SW4009", "SW4010", "SW4015",
                                               "SW4011", "SW4012", "SW4013", "SW4014", "SW4020", "SW4021", "SW4031",
                                               "SW4032", "SW4060", "SW7020")),
    ("check", "compiler/checks/variables.py", ("SW2080", "SW2081", "SW3082", "SW4080", "SW4081", "SW4082", "SW6080",
                                               "SW6081", "SW7122")),
    ("check", "compiler/checks/approvals.py", ("SW2082", "SW3080", "SW3081", "SW6082", "SW6083", "SW6084")),
    ("check", "compiler/checks/secrets.py", ("SW2001", "SW2010", "SW2040", "SW2041", "SW2042", "SW7040", "SW7041",
                                             "SW7042")),
    ("check", "compiler/checks/templates.py", ("SW2008", "SW4032", "SW5001", "SW5003", "SW5004")),
    ("check", "compiler/checks/template_types.py", ("SW2006", "SW4012", "SW4014", "SW4031", "SW5002",
                                                    "SW5010")),
    ("check", "compiler/checks/testblocks.py", ("SW3015", "SW4006", "SW4011", "SW6002", "SW6003", "SW6004",
                                                "SW6005", "SW6006", "SW6007", "SW6008", "SW6009", "SW6020",
                                                "SW6040", "SW6041", "SW6042", "SW7006", "SW7043")),
    ("check", "compiler/checks/settings.py", ("SW2010", "SW2011", "SW3015")),
    ("check", "compiler/checks/shape.py", ("SW3009", "SW3010", "SW3011", "SW3012", "SW3013", "SW3014", "SW3015",
                                           "SW3016", "SW3017", "SW3018", "SW3019", "SW3020", "SW3021", "SW3022",
                                           "SW3023", "SW3024", "SW3025")),
    ("check", "compiler/checks/bounds.py", ("SW2070", "SW3040", "SW4040")),
    ("check", "compiler/checks/graph.py", ("SW3001", "SW3002", "SW3003", "SW3005", "SW3006", "SW3007", "SW3008",
                                           "SW7004", "SW7007")),
    ("check", "compiler/checks/listeners.py", ("SW7008", "SW7009", "SW7010")),
    ("check", "compiler/checks/unused.py", ("SW7001", "SW7002", "SW7003", "SW7005", "SW7120", "SW7121")),
    ("check", "compiler/checks/__init__.py", ("SW9001",)),
    ("lower, load", "compiler/pipeline.py", ("SW9001",)),
    ("fmt", "compiler/tools/formatter.py", ("SW9001",)),
    ("import", "importers/__init__.py", ("SW8003",)),
    ("import", "importers/json_source.py", ("SW8001",)),
    ("import", "importers/xml_source.py", ("SW8002",)),
    ("import", "importers/schema.py", ("SW8004", "SW8005", "SW8006")),
    ("import", "importers/metaagent.py", ("SW8007", "SW8008", "SW8101", "SW8102", "SW8103", "SW8104", "SW8107")),
    ("import", "importers/autoagent.py", ("SW8004", "SW8005", "SW8007", "SW8008", "SW8105", "SW8106", "SW8116",
                                          "SW8117")),
    ("import", "importers/yaml_source.py", ("SW8007", "SW8010")),
    ("import", "importers/crewai_python.py", ("SW8011",)),
    ("import", "importers/crewai_spec.py", ("SW1021", "SW8003", "SW8004", "SW8005", "SW8012", "SW8013", "SW8114")),
    ("import", "importers/crewai_tools.py", ("SW8112",)),
    ("import", "importers/crewai.py", ("SW8110", "SW8111", "SW8113", "SW8115")),
    ("any", "cli.py", ("SW9001",)),
)

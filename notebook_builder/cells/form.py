"""Settings: the form a Colab user fills in before **Runtime > Run all**.

The first code cell of the notebook. It holds only the fields (`#@param`
lines, which Colab shows as a form and rewrites when a field changes);
`c01_form` turns them into CFG, validated like every other knob. Outside
Colab a field left at its shipped value defers to the KY_* environment.
"""
#@title Settings { display-mode: "form" }
#@markdown **Where the archive goes.** `drive` keeps everything in your Google Drive folder below, so a
#@markdown new session resumes where the last one stopped. A `/content/...` folder is this runtime's own
#@markdown disk: Colab deletes it when the runtime ends.
FORM_STORE = "drive"  #@param ["drive", "/content/ky_court_store"] {allow-input: true}
FORM_DRIVE_FOLDER = "ky_court"  #@param {type:"string"}
#@markdown **What to do this session.** The budget is wall-clock hours (Colab allows about 12).
FORM_PHASES = "discover,backfill,download,extract,ocr,derive,index"  #@param {type:"string"}
FORM_BUDGET_HOURS = 10  #@param {type:"number"}
#@markdown **A trial run.** Download at most this many documents (0: no limit), of case years in this
#@markdown range (an empty last year means the current year).
FORM_DOWNLOAD_LIMIT = 0  #@param {type:"integer"}
FORM_FIRST_YEAR = 1990  #@param {type:"integer"}
FORM_LAST_YEAR = ""  #@param {type:"string"}
#@markdown **Repairs.** Retry documents that failed for good; or ask nothing of the court (a dry run).
FORM_RETRY_HARD = False  #@param {type:"boolean"}
FORM_DRY_RUN = False  #@param {type:"boolean"}
#@markdown **Probe first.** Ask the court at most 10 requests, print what each endpoint answered, and
#@markdown stop before any stage when the pipeline cannot run against it.
FORM_PROBE_FIRST = False  #@param {type:"boolean"}

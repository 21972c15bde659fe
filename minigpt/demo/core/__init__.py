"""The core every section stands on: the one state, the models, a text as a model reads it, the visitor's inputs
checked, the recorded passes and the cores they run on, links, the error rule, the ui and view pieces every section
uses (with their .js and .css). It imports no section but where the state holds one's store (the Head Finder's
metrics, the Train tab's queue)."""

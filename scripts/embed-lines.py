#!/usr/bin/env python3
"""embed-lines.py: decision 0096's table. For each use of balde's binary, the
non-blank, non-comment lines of cmd/balde an embedding application had to
copy at commit 323f305 (the declarations since moved into the module), and
the non-blank, non-comment lines of the runnable example that does the same
now (example_uses_test.go). The rows of the third pass count from b89b040,
where that pass started (example_show_test.go), and the fourth pass's from
a0441fc and e006a33 (example_commands_test.go). Run from the repository's root:

    python3 scripts/embed-lines.py
"""
import re, subprocess, sys
BASE='323f305'
def src(path, rev=None):
    if rev: return subprocess.run(['git','show',f'{rev}:{path}'],capture_output=True,text=True,check=True).stdout
    return open(path).read()
def decl_lines(text, name):
    # top-level func/method/type/var/const named `name`, with its doc comment; non-blank lines
    lines=text.split('\n')
    pat=re.compile(r'^(func (\([^)]*\) )?%s[\[(]|type %s |var %s |const %s )' % ((re.escape(name),)*4))
    for i,l in enumerate(lines):
        if pat.match(l):
            j=i
            if l.rstrip().endswith('{') or l.rstrip().endswith('('):
                while not (lines[j].startswith('}') or lines[j].startswith(')')): j+=1
            k=i
            while k>0 and lines[k-1].startswith('//'): k-=1
            return sum(1 for x in lines[i:j+1] if x.strip() and not x.strip().startswith('//'))
    raise SystemExit(f'{name} not found')
def body(text, name):
    lines=text.split('\n')
    for i,l in enumerate(lines):
        if l.startswith(f'func {name}('):
            j=i+1; n=0
            while not lines[j].startswith('}'):
                if lines[j].strip() and not lines[j].strip().startswith('//'): n+=1
                j+=1
            return n
before={
 'serve': [('cmd/balde/serve.go',['run','stopRun','wait','newInboundConfig','openServer','storeHealth','adminPassword','dataDir']),('cmd/balde/buckets.go',['sqlitePath'])],
 'gateway': [('cmd/balde/gateway.go',['serveGateway','gatewayMux']),('cmd/balde/serve.go',['newInboundConfig'])],
 'sifen-send': [('cmd/balde/batch.go',['batchClock','waitHook','sleepContext','result','summary','undone','String','text','fmtSeconds','seconds','outputMode','chooseMode','isTerminal','reporter','barTick','newReporter','item','waiting','sleep','note','above','counts','finish','writeJSONLine'])],
 'dict-lookup': [('cmd/balde/dict_lookup.go',['lookupRecord','lookupRecordOf','lookupColumns','lookupWriter','createLookupWriter','write','close'])],
 'buckets/prune': [('cmd/balde/buckets.go',['page']),('cmd/balde/prune.go',['pruneCount'])],
}
after={'serve':'ExampleEngine_Serve','gateway':'ExampleEngine_DictGateway','sifen-send':'Example_sifenSend','dict-lookup':'Example_dictLookup','buckets/prune':'Example_buckets'}
ex=src('example_uses_test.go')
for use,files in before.items():
    n=0
    for f,names in files:
        t=src(f,BASE)
        for nm in names: n+=decl_lines(t,nm)
    print(f'{use:14s} copied from cmd/balde before: {n:4d} lines; example body now: {body(ex,after[use]):3d} lines')

# Third pass: what buckets show still kept in cmd/balde at b89b040.
BASE3='b89b040'
before3={
 'buckets show': [('cmd/balde/buckets.go',['requireDatabase','bucketKey','knownPolicies','shorten','readAnswer','bucketView','lastSendIn','view','scope','bucketJSON','ledgerJSON','newLedgerJSON'])],
}
after3={'buckets show':('example_show_test.go','Example_bucketsShow')}
for use,files in before3.items():
    n=0
    for f,names in files:
        t=src(f,BASE3)
        for nm in names: n+=decl_lines(t,nm)
    path,name=after3[use]
    print(f'{use:14s} copied from cmd/balde at {BASE3}: {n:4d} lines; example body now: {body(src(path),name):3d} lines')

# Fourth pass: what sifen-send's run and buckets reset kept in cmd/balde
# (at a0441fc, where that pass started; the reset as e006a33 merged it,
# with its reason and audit entry, prompt included).
before4={
 'sifen-send run': ('a0441fc','cmd/balde/sifen_send.go',['parseDocuments','sifenBatch','finish','run','interrupted','draw','result','follow','drawFollow']),
 'buckets reset': ('e006a33','cmd/balde/buckets.go',['reset','defaultActor']),
}
after4={'sifen-send run':'Example_sifenSendReport','buckets reset':'Example_bucketsReset'}
ex4=src('example_commands_test.go')
for use,(rev,f,names) in before4.items():
    t=src(f,rev)
    n=sum(decl_lines(t,nm) for nm in names)
    print(f'{use:14s} copied from cmd/balde at {rev}: {n:4d} lines; example body now: {body(ex4,after4[use]):3d} lines')
